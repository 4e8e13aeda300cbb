"""What a task needs of its sandbox: one small interface, backed by ROCK (`rock_sandbox`) or by Docker.

Running a task needs only four things from its sandbox: run a shell command under a timeout, upload files,
read a file back, and close. `SandboxProvider.image` makes a task's image, `open` one sandbox per attempt
from it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from pydantic import BaseModel

from rock.sdk import ImageInfo
from rome.terminal_tasks.task import Task

OUTPUT_CAP = 256 * 1024
TRUNCATION_MARKER = "\n[... output truncated by rome-bench ...]\n"
# Margin past a command's own timeout before the harness gives up on the sandbox answering at all.
BACKSTOP_SEC = 30.0


class CommandResult(BaseModel):
    output: str
    exit_code: int | None
    duration_sec: float
    timed_out: bool


class SandboxError(RuntimeError):
    """The sandbox could not be created or stopped answering."""


class TrialSandbox(Protocol):
    def run(self, command: str, timeout: float, env: dict[str, str] | None = None) -> CommandResult: ...

    def upload(self, paths: list[Path], remote_dir: str) -> None:
        """Copy each file or folder in `paths` into `remote_dir` under its own name."""

    def read_text(self, path: str) -> str | None:
        """The file's text, or None when it does not exist."""

    def close(self) -> None: ...


class SandboxProvider(Protocol):
    name: str

    def image(self, task: Task) -> ImageInfo:
        """The task's image where this provider's sandboxes run (TaskImageError when it does not build)."""

    def open(self, image: ImageInfo, task: Task) -> TrialSandbox: ...


def cap_output(text: str) -> str:
    if len(text) <= OUTPUT_CAP:
        return text
    half = OUTPUT_CAP // 2
    return text[:half] + TRUNCATION_MARKER + text[-half:]
