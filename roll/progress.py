"""Progress of a long loop wherever it is watched.

In a terminal: a live rich bar. Written to a file or a CI log (no terminal), rich would show a live display
only once it ends, so there each update is one plain line instead: `step 3/18 [95s] <info>`.
"""

from __future__ import annotations

import time
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


def print_plain(console: Console, line: str) -> None:
    """A line as it is: no markup, highlighting or wrapping, so a log holds exactly one line for it."""
    console.print(line, markup=False, highlight=False, soft_wrap=True)


class StepProgress:
    """`with StepProgress(console, total, start, "step") as progress: progress.update(n, info)`."""

    def __init__(self, console: Console, total: int, start: int, name: str = "step") -> None:
        self._console, self._total, self._name = console, total, name
        self._started = time.monotonic()
        self._progress: Progress | None = None
        if console.is_terminal:
            self._progress = Progress(
                TextColumn(f"[bold]{name}"),
                MofNCompleteColumn(),
                BarColumn(bar_width=20),
                TimeElapsedColumn(),
                TextColumn("{task.fields[info]}"),
                console=console,
            )
            self._task = self._progress.add_task(name, total=total, completed=start, info="starting")

    def __enter__(self) -> StepProgress:
        if self._progress is not None:
            self._progress.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._progress is not None:
            self._progress.__exit__(kind, error, trace)

    def update(self, done: int, info: str) -> None:
        """`done` steps of `total` are done; `info` says how the last one went."""
        if self._progress is not None:
            self._progress.update(self._task, completed=done, info=info)
            return
        elapsed = time.monotonic() - self._started
        print_plain(self._console, f"{self._name} {done}/{self._total} [{elapsed:.0f}s] {info}")
