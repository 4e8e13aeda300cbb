"""The executor protocol: where tools act (the user's machine, or a ROCK sandbox).

Tools are written once against these few operations, so every tool works the same on each executor.
Paths given to an executor are relative to its working directory, or absolute inside it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

DEFAULT_OUTPUT_CAP = 30_000
SKIPPED_DIRS = {".git", "node_modules", "__pycache__", ".venv", ".mypy_cache", ".pytest_cache"}


class ExecutorError(Exception):
    """A file operation failed; the message is meant for the model and says what to do instead."""


@dataclass
class CommandResult:
    output: str
    exit_code: int | None
    timed_out: bool = False
    truncated: bool = False
    duration_s: float = 0.0


@dataclass
class DirEntry:
    name: str
    is_dir: bool
    size: int | None = None


@dataclass
class SearchMatch:
    path: str
    line: int
    text: str


class Executor(Protocol):
    """What tools may do. ``workdir`` is shown to the model as its working directory."""

    kind: str
    workdir: str

    def run(self, command: str, timeout_s: float) -> CommandResult: ...

    def read_text(self, path: str) -> str: ...

    def write_text(self, path: str, content: str) -> None: ...

    def exists(self, path: str) -> bool: ...

    def list_directory(self, path: str) -> list[DirEntry]: ...

    def list_files(self, path: str) -> list[str]:
        """Every file below ``path`` (relative to the working directory), skipping SKIPPED_DIRS."""
        ...

    def search(self, pattern: str, path: str, include: str | None, max_matches: int) -> list[SearchMatch]: ...

    def fingerprints(self, paths: list[str]) -> dict[str, str | None]:
        """A change stamp (mtime and size) per path, None for missing files: how edits by others are seen."""
        ...

    def close(self) -> None: ...


def cap_output(text: str, limit: int = DEFAULT_OUTPUT_CAP) -> tuple[str, bool]:
    """Keep the head and the tail of long output, where errors and summaries usually are."""
    if len(text) <= limit:
        return text, False
    head = limit * 2 // 5
    tail = limit - head
    omitted = len(text) - head - tail
    return f"{text[:head]}\n... [{omitted} characters omitted] ...\n{text[-tail:]}", True


def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """A glob with ``**`` (any depth), ``*``, ``?`` and ``{a,b}`` as a regex over '/'-separated paths."""
    out = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "{" and "}" in pattern[i:]:
            end = pattern.index("}", i)
            options = pattern[i + 1 : end].split(",")
            out.append("(?:" + "|".join(re.escape(option) for option in options) + ")")
            i = end
        else:
            out.append(re.escape(char))
        i += 1
    return re.compile("".join(out) + r"\Z")


def match_glob(pattern: str, relative_paths: list[str]) -> list[str]:
    """Paths matching ``pattern``, sorted; ``*.py`` is the top level only, ``**/*.py`` any depth."""
    regex = glob_to_regex(pattern.removeprefix("./"))
    return sorted(path for path in relative_paths if regex.match(path))
