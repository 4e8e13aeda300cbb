"""Terminal tasks (rome-bench layout) as environments: `terminal:<task dir>`.

`reset` builds the task image (cached) and starts its sandbox, returning the instruction. `step(action)` runs
the action as bash in a persistent session (cwd and variables carry over) and returns its output ending in
`Exit code: N`, the convention iflow's tools follow. The action `finish` (or reaching `max_steps`) copies the
tests in, runs them and ends the episode with reward 1 if they pass, else 0.

Tasks are written for a root shell (they edit /app, /etc): their sandboxes are opened through rome-bench's
`RockSandbox`, which asks any fleet for `user="root"`.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from rock.envs.errors import EnvError, UnknownEnvId
from rock.sdk import CommandTimeout, RockError
from rome.bench.images import TaskImageError, ensure_image
from rome.bench.rock_sandbox import RockSandbox
from rome.bench.sandbox import SandboxError
from rome.bench.tasks import Task, TaskLoadError, load_task
from rome.bench.trial import TrialResult, verify

TERMINAL_PREFIX = "terminal:"
FINISH_ACTION = "finish"
SESSION = "agent"


def load_terminal_task(env_id: str) -> Task:
    task_dir = Path(env_id.removeprefix(TERMINAL_PREFIX)).expanduser()
    if not task_dir.is_dir():
        raise UnknownEnvId(f"{env_id!r}: {task_dir} is not a folder; pass terminal:<task dir>")
    loaded = load_task(task_dir)
    if isinstance(loaded, TaskLoadError):
        raise UnknownEnvId(f"{env_id!r} is not a valid task: {loaded}")
    return loaded


class TerminalTaskEnv:
    def __init__(
        self, env_id: str, admin_url: str | None, max_steps: int = 30, step_timeout: float | None = None
    ) -> None:
        if max_steps < 1:
            raise EnvError(f"max_steps must be at least 1, got {max_steps}")
        self.task = load_terminal_task(env_id)
        self.admin_url = admin_url
        self.max_steps = max_steps
        self.step_timeout = step_timeout or self.task.agent_timeout_sec
        self.box: RockSandbox | None = None
        self.steps = 0
        self.done = True

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        """A fresh sandbox of the task; `seed` is accepted for the GEM signature (tasks are deterministic)."""
        self.close()
        try:
            image = ensure_image(self.task)
            self.box = RockSandbox(image, self.task, self.admin_url)
            self.box.rock.create_session(SESSION, cwd=self.box.workdir)
        except (TaskImageError, SandboxError, RockError) as error:
            self.close()
            raise EnvError(f"task {self.task.id}: could not start its sandbox: {error}") from error
        self.steps, self.done = 0, False
        info = {"task_id": self.task.id, "workdir": self.box.workdir, "max_steps": self.max_steps}
        return {"observation": self.task.instruction, "info": info}

    def step(self, action: Any) -> dict[str, Any]:
        if self.done or self.box is None:
            raise EnvError(f"task {self.task.id}: the episode is over (or never started); call reset")
        if not isinstance(action, str):
            raise EnvError(f"an action is a bash command (a string) or {FINISH_ACTION!r}, got {action!r}")
        self.steps += 1
        if action.strip() == FINISH_ACTION:
            return self._grade(truncated=False)
        observation = self._run(action)
        if self.steps >= self.max_steps:
            graded = self._grade(truncated=True)
            graded["observation"] = observation
            return graded
        return {
            "observation": observation,
            "reward": 0.0,
            "terminated": False,
            "truncated": False,
            "info": {},
        }

    def close(self) -> None:
        if self.box is not None:
            with contextlib.suppress(SandboxError, RockError):
                self.box.close()
        self.box = None
        self.done = True

    def _run(self, command: str) -> str:
        assert self.box is not None
        try:
            result = self.box.rock.run(command, session=SESSION, timeout=self.step_timeout)
        except CommandTimeout as error:
            output = error.observation.output if error.observation is not None else ""
            return f"{output}\nError: the command ran past {self.step_timeout:g} s and was stopped"
        except RockError as error:
            raise EnvError(f"task {self.task.id}: the sandbox failed: {error}") from error
        return f"{result.output.rstrip()}\nExit code: {result.exit_code}"

    def _grade(self, truncated: bool) -> dict[str, Any]:
        assert self.box is not None
        task = self.task
        result = TrialResult(
            task_id=task.id,
            attempt=0,
            agent="env",
            category=task.category,
            difficulty=task.difficulty,
            instruction=task.instruction,
        )
        try:
            verify(self.box, task, result)
        except SandboxError as error:
            raise EnvError(f"task {task.id}: running the tests failed: {error}") from error
        self.done = True
        info = {
            "verifier_output": result.verifier_output,
            "failure_mode": result.failure_mode,
            "steps": self.steps,
        }
        return {
            "observation": f"tests {'passed' if result.reward >= 1.0 else 'failed'}",
            "reward": 1.0 if result.reward >= 1.0 else 0.0,
            "terminated": not truncated,
            "truncated": truncated,
            "info": info,
        }
