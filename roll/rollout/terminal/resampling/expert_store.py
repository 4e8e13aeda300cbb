"""Saved experts: a task's refreshed expert on disk (`<output>/experts/<task id>.json`), and loading it when a
run starts, so a new run continues from the policy's own expert instead of the oracle's.

A saved expert is only used for the task files it was made on: the file records a fingerprint of the task
folder (every file: instruction, environment, tests, solution, task.toml), and a file whose fingerprint
differs, or that is not a well-formed expert, is rejected with a message saying why; the task then starts
from its oracle, and its next refresh overwrites the file.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from roll.rollout.terminal.resampling.expert import ExpertStep

ORACLE = "oracle"


@dataclass
class TaskExpert:
    """One task's current expert: its steps and, per step, where it came from (oracle or an episode id)."""

    steps: list[ExpertStep]
    origins: list[str]
    refreshes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def native(self) -> int:
        """How many steps the policy wrote itself."""
        return sum(origin != ORACLE for origin in self.origins)

    def to_json(self) -> dict[str, Any]:
        return {
            "steps": [asdict(step) for step in self.steps],
            "origins": self.origins,
            "refreshes": self.refreshes,
        }


class SavedExpertError(ValueError):
    """A saved expert file that cannot be used for the task (malformed, or made on other task files)."""


def task_fingerprint(folder: Path) -> str:
    """sha256 over the relative paths and contents of every regular file under the task's folder."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        name = path.relative_to(folder).as_posix().encode()
        content = path.read_bytes()
        digest.update(b"%d:%s%d:" % (len(name), name, len(content)))
        digest.update(content)
    return digest.hexdigest()


def expert_json(expert: TaskExpert, fingerprint: str | None) -> dict[str, Any]:
    return {"task_fingerprint": fingerprint, **expert.to_json()}


def _steps(raw: Any) -> list[ExpertStep]:
    if not isinstance(raw, list) or not raw:
        raise SavedExpertError("'steps' must be a non-empty list")
    steps = []
    for index, step in enumerate(raw):
        if not isinstance(step, dict) or set(step) != {"command", "content"}:
            raise SavedExpertError(f"step {index} must be an object with exactly 'command' and 'content'")
        command, content = step["command"], step["content"]
        if command is not None and (not isinstance(command, str) or not command.strip()):
            raise SavedExpertError(f"step {index}: 'command' must be a non-empty string or null")
        if not isinstance(content, str):
            raise SavedExpertError(f"step {index}: 'content' must be a string")
        steps.append(ExpertStep(command=command, content=content))
    return steps


def parse_saved_expert(data: Any, fingerprint: str) -> TaskExpert:
    """The expert in a saved file's JSON; SavedExpertError when it is malformed or was made on task files
    whose fingerprint is not `fingerprint`."""
    if not isinstance(data, dict):
        raise SavedExpertError("it is not a JSON object")
    saved_fingerprint = data.get("task_fingerprint")
    if saved_fingerprint is None:
        raise SavedExpertError(
            "it records no task fingerprint (saved by an older version), so it may not fit the task's files"
        )
    if saved_fingerprint != fingerprint:
        raise SavedExpertError(
            f"the task's files changed since it was saved (fingerprint {str(saved_fingerprint)[:12]}, "
            f"now {fingerprint[:12]})"
        )
    steps = _steps(data.get("steps"))
    origins = data.get("origins")
    if not isinstance(origins, list) or [type(o) for o in origins] != [str] * len(steps):
        raise SavedExpertError(f"'origins' must be a list of {len(steps)} strings, one per step")
    refreshes = data.get("refreshes", [])
    if not isinstance(refreshes, list) or not all(isinstance(r, dict) for r in refreshes):
        raise SavedExpertError("'refreshes' must be a list of objects")
    return TaskExpert(steps, origins, refreshes)


def load_saved_expert(path: Path, fingerprint: str) -> TaskExpert:
    """The expert saved at `path` for a task with `fingerprint`; SavedExpertError saying why it is unusable.
    FileNotFoundError when there is none."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise
    except OSError as error:
        raise SavedExpertError(f"it cannot be read ({error.strerror or error})") from error
    except UnicodeDecodeError as error:
        raise SavedExpertError(f"it is not UTF-8 text ({error})") from error
    except json.JSONDecodeError as error:
        raise SavedExpertError(f"it is not valid JSON ({error})") from error
    return parse_saved_expert(data, fingerprint)


@dataclass(frozen=True)
class ExpertStart:
    """Which expert a task's run starts from, and why not the saved one when that was rejected."""

    task_id: str
    source: str  # "saved", "oracle", or where the task's given expert comes from
    path: Path | None
    steps: int
    policy_steps: int
    problem: str | None = None

    def describe(self) -> str:
        if self.source == "saved":
            return (
                f"{self.task_id}: starts from its saved expert {self.path} ({self.steps} steps, "
                f"{self.policy_steps} the policy's own)"
            )
        line = f"{self.task_id}: starts from the {self.source} expert ({self.steps} steps)"
        if self.problem is None:
            return line + (f"; no saved expert at {self.path}" if self.path else "")
        return (
            f"{line}: the saved expert {self.path} is not used: {self.problem}. Delete it or pick another "
            "output folder; the task's next refresh overwrites it"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "path": None if self.path is None else str(self.path),
            "steps": self.steps,
            "policy_steps": self.policy_steps,
            "problem": self.problem,
        }
