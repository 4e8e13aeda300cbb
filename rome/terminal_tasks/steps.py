"""Harbor multi-step tasks (task.toml schema 1.1 `[[steps]]`): ordered steps in one shared sandbox.

Layout: `steps/<name>/instruction.md` (required), `steps/<name>/solution/solve.sh`, `steps/<name>/tests/` and
`steps/<name>/workdir/` (optional). The task's own `tests/` holds helpers shared by every step (and may hold a
fallback test.sh); it is uploaded to /tests first and the step's tests over it, so a step's file wins over a
shared one. A step's `workdir/` is copied into the environment's workdir before its agent starts, and its
`workdir/setup.sh` (if any) is run there and removed; then the step's healthcheck must pass.

A step's table may set `[steps.agent] timeout_sec`, `[steps.verifier] timeout_sec` and `env` (non-empty, it
replaces the task's `[verifier.env]`; empty or absent, the task's is inherited), `[steps.healthcheck]`,
`artifacts`, `min_reward` and `contributes_to_mean`. Harbor has no per-step agent environment or network.

Rewards roll up as Harbor defines: `multi_step_reward_strategy = "mean"` (the default) averages the steps that
contribute to the mean (`contributes_to_mean`, default true), a step that never ran counting 0; `"final"` is
the last step's reward. A step with `min_reward` whose reward falls below it stops the trial early (a number
gates `reward`; a table gates each metric of the step's reward.json it names).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rome.terminal_tasks.harbor_fields import (
    Artifact,
    Healthcheck,
    read_artifacts,
    read_min_reward,
    resolve_env,
)

StepStrategy = Literal["mean", "final"]


class TaskStep(BaseModel):
    """One step as it runs: its instruction, its verifier and its oracle. Paths are on the host."""

    model_config = ConfigDict(frozen=True)

    name: str
    instruction: str
    tests_dir: Path | None
    test_command: str
    grading: Literal["reward-file", "pytest"]
    solution_files: list[Path] = Field(default_factory=list)
    solution_command: str | None = None
    agent_timeout_sec: float
    verifier_timeout_sec: float
    # metric -> threshold: the trial stops after this step when any metric falls below its threshold.
    min_reward: dict[str, float] | None = None
    contributes_to_mean: bool = True
    verifier_env: dict[str, str] = Field(default_factory=dict)
    healthcheck: Healthcheck | None = None
    artifacts: list[Artifact] = Field(default_factory=list)
    # `steps/<name>/workdir/`: copied into the environment's workdir before the step's agent.
    workdir_dir: Path | None = None

    def below_gate(self, metrics: dict[str, float]) -> str | None:
        """Which threshold of `min_reward` the step's metrics missed (a missing metric counts 0), or None."""
        for name, threshold in (self.min_reward or {}).items():
            value = metrics.get(name, 0.0)
            if value < threshold:
                return f"{name} {value:g} < min_reward {threshold:g}"
        return None


class _Timeout(BaseModel):
    model_config = ConfigDict(extra="ignore")
    timeout_sec: float | None = Field(default=None, gt=0)


class _StepVerifier(_Timeout):
    env: dict[str, Any] | None = None


class _StepToml(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str = Field(min_length=1, pattern=r"^[^/\\]+$")
    agent: _Timeout = Field(default_factory=_Timeout)
    verifier: _StepVerifier = Field(default_factory=_StepVerifier)
    healthcheck: Healthcheck | None = None
    contributes_to_mean: bool = True


class StepError(ValueError):
    """A `[[steps]]` entry or its folder is malformed: the file, the field and what to do."""

    def __init__(self, file: str, field: str | None, message: str) -> None:
        super().__init__(message)
        self.file, self.field, self.message = file, field, message


def aggregate(rewards: list[float | None], steps: list[TaskStep], strategy: StepStrategy) -> float:
    """The trial's reward from its steps' rewards (None: the step did not run)."""
    if strategy == "final":
        return (rewards[-1] or 0.0) if rewards else 0.0
    counted = [r or 0.0 for r, s in zip(rewards, steps, strict=True) if s.contributes_to_mean]
    return sum(counted) / len(counted) if counted else 0.0


def load_steps(
    task_dir: Path,
    raw: dict[str, Any],
    agent_timeout: float,
    verifier_timeout: float,
    test_command_of: Any,
    task_verifier_env: dict[str, str] | None = None,
) -> list[TaskStep]:
    """The steps of a task.toml that has `[[steps]]`; `test_command_of(dirs)` picks a verifier command."""
    entries = raw.get("steps")
    if not isinstance(entries, list) or not entries:
        raise StepError("task.toml", "steps", "must be a non-empty array of tables ([[steps]] name = ...)")
    shared = task_dir / "tests"
    steps: list[TaskStep] = []
    for index, entry in enumerate(entries):
        try:
            config = _StepToml.model_validate(entry)
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first["loc"])
            raise StepError("task.toml", f"[[steps]][{index}].{loc}", first["msg"]) from exc
        where_toml = f"[[steps]][{index}]"
        try:
            step_env = resolve_env(config.verifier.env, f"{where_toml}.verifier.env")
            artifacts = read_artifacts(entry.get("artifacts"), f"{where_toml}.artifacts")
            min_reward = read_min_reward(entry.get("min_reward"), f"{where_toml}.min_reward")
        except (ValueError, ValidationError) as exc:
            raise StepError("task.toml", where_toml, str(exc)) from exc
        folder = task_dir / "steps" / config.name
        where = f"steps/{config.name}"
        instruction_file = folder / "instruction.md"
        if not instruction_file.is_file():
            raise StepError(f"{where}/instruction.md", None, "is missing; every step needs its instruction")
        instruction = instruction_file.read_text().strip()
        if not instruction:
            raise StepError(f"{where}/instruction.md", None, "is empty; write the step for the agent in it")
        tests = folder / "tests"
        found = test_command_of([d for d in (tests, shared) if d.is_dir()])
        if found is None:
            raise StepError(
                f"{where}/tests/", None, "has no test.sh or test_outputs.py, nor has tests/; add the verifier"
            )
        solve = folder / "solution" / "solve.sh"
        steps.append(
            TaskStep(
                name=config.name,
                instruction=instruction,
                tests_dir=tests if tests.is_dir() else None,
                test_command=found[0],
                grading=found[1],
                solution_files=sorted(p for p in (folder / "solution").glob("*") if p.is_file()),
                solution_command="bash /solution/solve.sh" if solve.is_file() else None,
                agent_timeout_sec=config.agent.timeout_sec or agent_timeout,
                verifier_timeout_sec=config.verifier.timeout_sec or verifier_timeout,
                min_reward=min_reward,
                contributes_to_mean=config.contributes_to_mean,
                verifier_env=step_env or dict(task_verifier_env or {}),
                healthcheck=config.healthcheck,
                artifacts=artifacts,
                workdir_dir=folder / "workdir" if (folder / "workdir").is_dir() else None,
            )
        )
    names = [s.name for s in steps]
    if len(set(names)) != len(names):
        raise StepError("task.toml", "steps", f"step names must be unique, got {names}")
    return steps
