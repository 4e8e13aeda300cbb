"""A terminal task as a GEM-style environment, `terminal:<task dir>`, played in a ROCK sandbox.

`reset` builds the task image (cached) and starts its sandbox, returning the instruction. `step(action)` runs
the action as bash in a persistent session (cwd and variables carry over) and returns its output ending in
`Exit code: N`, the convention iflow's tools follow. The action `finish` (or reaching `max_steps`) copies the
tests in, runs them and ends the episode with reward 1 if they pass, else 0. `reset` and `step` return GEM's
tuples; the env runs where it is made (a rollout worker) and reaches its sandbox through the ROCK SDK.

Tasks are written for a root shell (they edit /app, /etc): their sandboxes are opened through `RockSandbox`,
which asks any fleet for `user="root"`.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from rock.sdk import CommandTimeout, RockError
from rome.terminal_tasks.rock_sandbox import RockSandbox, ensure_image
from rome.terminal_tasks.sandbox import SandboxError
from rome.terminal_tasks.task import Task, TaskImageError, TaskLoadError, load_task
from rome.terminal_tasks.verifier import verify

TERMINAL_PREFIX = "terminal:"
FINISH_ACTION = "finish"
SESSION = "agent"


class TaskEnvError(RuntimeError):
    """The task cannot be played: not a task folder, its sandbox failed, or the episode is over."""


def load_terminal_task(env_id: str) -> Task:
    task_dir = Path(env_id.removeprefix(TERMINAL_PREFIX)).expanduser()
    if not task_dir.is_dir():
        raise TaskEnvError(f"{env_id!r}: {task_dir} is not a folder; pass terminal:<task dir>")
    loaded = load_task(task_dir)
    if isinstance(loaded, TaskLoadError):
        raise TaskEnvError(f"{env_id!r} is not a valid task: {loaded}")
    return loaded


Step = tuple[str, float, bool, bool, dict[str, Any]]


class TerminalTaskEnv:
    """One task; each `reset` is a fresh sandbox from its image on the fleet at `admin_url`."""

    def __init__(
        self, env_id: str, admin_url: str | None, max_steps: int = 30, step_timeout: float | None = None
    ) -> None:
        if max_steps < 1:
            raise TaskEnvError(f"max_steps must be at least 1, got {max_steps}")
        self.task = load_terminal_task(env_id)
        self.admin_url = admin_url
        self.max_steps = max_steps
        self.step_timeout = step_timeout or self.task.agent_timeout_sec
        self.box: RockSandbox | None = None
        self.steps = 0
        self.done = True

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """A fresh sandbox of the task; `seed` is accepted for the GEM signature (tasks are deterministic)."""
        self.close()
        try:
            image = ensure_image(self.task, self.admin_url)
            self.box = RockSandbox(image, self.task, self.admin_url)
            self.box.rock.create_session(SESSION, cwd=self.box.workdir)
        except (TaskImageError, SandboxError, RockError) as error:
            self.close()
            raise TaskEnvError(f"task {self.task.id}: could not start its sandbox: {error}") from error
        self.steps, self.done = 0, False
        return self.task.instruction, {
            "task_id": self.task.id,
            "workdir": self.box.workdir,
            "max_steps": self.max_steps,
        }

    def step(self, action: Any) -> Step:
        if self.done or self.box is None:
            raise TaskEnvError(f"task {self.task.id}: the episode is over (or never started); call reset")
        if not isinstance(action, str):
            raise TaskEnvError(f"an action is a bash command (a string) or {FINISH_ACTION!r}, got {action!r}")
        self.steps += 1
        if action.strip() == FINISH_ACTION:
            return self._grade(truncated=False)
        observation = self._run(action)
        if self.steps >= self.max_steps:
            _, reward, terminated, truncated, info = self._grade(truncated=True)
            return observation, reward, terminated, truncated, info
        return observation, 0.0, False, False, {}

    def close(self) -> None:
        if self.box is not None:
            with contextlib.suppress(SandboxError, RockError):
                self.box.close()
        self.box = None
        self.done = True

    def __enter__(self) -> TerminalTaskEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, command: str) -> str:
        assert self.box is not None
        try:
            result = self.box.rock.run(command, session=SESSION, timeout=self.step_timeout)
        except CommandTimeout as error:
            output = error.observation.output if error.observation is not None else ""
            return f"{output}\nError: the command ran past {self.step_timeout:g} s and was stopped"
        except RockError as error:
            raise TaskEnvError(f"task {self.task.id}: the sandbox failed: {error}") from error
        return f"{result.output.rstrip()}\nExit code: {result.exit_code}"

    def _grade(self, truncated: bool) -> Step:
        assert self.box is not None
        try:
            verdict = verify(self.box, self.task)
        except SandboxError as error:
            raise TaskEnvError(f"task {self.task.id}: running the tests failed: {error}") from error
        self.done = True
        passed = verdict.reward >= 1.0
        info = {"verifier_output": verdict.output, "failure_mode": verdict.failure_mode, "steps": self.steps}
        return (
            f"tests {'passed' if passed else 'failed'}",
            1.0 if passed else 0.0,
            not truncated,
            truncated,
            info,
        )
