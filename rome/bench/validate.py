"""Suite validation: the oracle must pass every task and the nop agent must fail every task."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, Field

from rome.bench.runner import BuildOutcome, ProgressHook, build_all, run_trials
from rome.bench.trial import TrialResult
from rome.bench.verdict import Verdict
from rome.terminal_tasks.sandbox import SandboxProvider
from rome.terminal_tasks.task import Task, TaskLoadError


class StepCheck(BaseModel):
    """One step of a multi-step task under validation: the oracle must pass it and nop must not."""

    name: str
    oracle_reward: float | None
    nop_reward: float | None

    @property
    def problem(self) -> str | None:
        if self.oracle_reward is not None and self.oracle_reward < 1.0:
            return f"step {self.name}: oracle fails"
        if self.nop_reward is not None and self.nop_reward >= 1.0:
            return f"step {self.name}: nop passes"
        return None


class ValidationRow(BaseModel):
    task_id: str
    category: str
    difficulty: str
    oracle_reward: float
    nop_reward: float
    oracle_error: str | None
    nop_error: str | None
    oracle_verdict: Verdict = "failed"
    nop_verdict: Verdict = "failed"
    # Set when this machine could not judge the task (an infra error in either run), with the reason.
    cannot_run: str | None = None
    steps: list[StepCheck] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            self.cannot_run is None
            and self.oracle_reward >= 1.0
            and self.nop_reward < 1.0
            and self.oracle_error is None
            and not any(s.problem for s in self.steps)
        )

    @property
    def broken(self) -> bool:
        """The task itself is at fault (as opposed to this machine being unable to run it)."""
        return self.cannot_run is None and not self.ok

    @property
    def problem(self) -> str:
        if self.cannot_run is not None:
            return f"cannot run here, because {self.cannot_run}"
        problems = []
        if self.oracle_reward < 1.0 or self.oracle_error:
            problems.append(f"oracle fails ({self.oracle_error or 'tests did not pass'})")
        if self.nop_reward >= 1.0:
            problems.append("nop passes: the tests accept the untouched environment")
        problems += [p for s in self.steps if (p := s.problem)]
        return "task broken: " + "; ".join(problems)


class ValidationReport(BaseModel):
    rows: list[ValidationRow]
    load_errors: list[TaskLoadError]

    @property
    def ok(self) -> bool:
        return not self.load_errors and all(r.ok for r in self.rows)

    @property
    def broken(self) -> list[ValidationRow]:
        return [r for r in self.rows if r.broken]

    @property
    def cannot_run(self) -> list[ValidationRow]:
        return [r for r in self.rows if r.cannot_run is not None]


def _by_id(trials: list[TrialResult]) -> dict[str, TrialResult]:
    return {t.task_id: t for t in trials}


def validate_tasks(
    tasks: list[Task],
    load_errors: list[TaskLoadError],
    output: Path,
    concurrency: int = 1,
    provider: SandboxProvider | None = None,
    on_trial: ProgressHook | None = None,
    built: Mapping[str, BuildOutcome] | None = None,
) -> ValidationReport:
    """`built`: the tasks' images on `provider`, made before (`build_all`); the rest are made here once."""
    if provider is None:
        from rome.bench.runner import sandbox_provider

        with sandbox_provider() as opened:
            return validate_tasks(tasks, load_errors, output, concurrency, opened, on_trial)
    if built is None:
        built = build_all(tasks, workers=min(concurrency, 2), provider=provider)

    def run(agent: str) -> dict[str, TrialResult]:
        trials = run_trials(
            tasks, agent, output / agent, 1, concurrency, provider=provider, on_trial=on_trial, built=built
        )
        return _by_id(trials)

    oracle, nop = run("oracle"), run("nop")
    rows = [_row(t, oracle[t.id], nop[t.id]) for t in tasks]
    return ValidationReport(rows=rows, load_errors=load_errors)


def _cannot_run(trial: TrialResult) -> str | None:
    if trial.verdict != "infra_error":
        return None
    return f"{trial.agent}: {trial.cause}: {trial.error or 'no detail'}"


def _row(task: Task, oracle: TrialResult, nop: TrialResult) -> ValidationRow:
    nop_steps = {s.name: s.reward for s in nop.steps}
    oracle_steps = {s.name: s.reward for s in oracle.steps}
    return ValidationRow(
        task_id=task.id,
        category=task.category,
        difficulty=task.difficulty,
        oracle_reward=oracle.reward,
        nop_reward=nop.reward,
        oracle_error=oracle.error,
        nop_error=nop.error if nop.verdict == "infra_error" else None,
        oracle_verdict=oracle.verdict,
        nop_verdict=nop.verdict,
        cannot_run=_cannot_run(oracle) or _cannot_run(nop),
        steps=[
            StepCheck(name=s.name, oracle_reward=oracle_steps.get(s.name), nop_reward=nop_steps.get(s.name))
            for s in task.steps
        ],
    )
