"""Suite validation: the oracle must pass every task and the nop agent must fail every task."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from rome.bench.runner import ProgressHook, run_trials
from rome.bench.trial import TrialResult
from rome.terminal_tasks.sandbox import SandboxProvider
from rome.terminal_tasks.task import Task, TaskLoadError


class ValidationRow(BaseModel):
    task_id: str
    category: str
    difficulty: str
    oracle_reward: float
    nop_reward: float
    oracle_error: str | None
    nop_error: str | None

    @property
    def ok(self) -> bool:
        return self.oracle_reward >= 1.0 and self.nop_reward < 1.0 and self.oracle_error is None

    @property
    def problem(self) -> str:
        problems = []
        if self.oracle_reward < 1.0 or self.oracle_error:
            problems.append(f"oracle fails ({self.oracle_error or 'tests did not pass'})")
        if self.nop_reward >= 1.0:
            problems.append("nop passes: the tests accept the untouched environment")
        return "; ".join(problems)


class ValidationReport(BaseModel):
    rows: list[ValidationRow]
    load_errors: list[TaskLoadError]

    @property
    def ok(self) -> bool:
        return not self.load_errors and all(r.ok for r in self.rows)


def _by_id(trials: list[TrialResult]) -> dict[str, TrialResult]:
    return {t.task_id: t for t in trials}


def validate_tasks(
    tasks: list[Task],
    load_errors: list[TaskLoadError],
    output: Path,
    concurrency: int = 1,
    provider: SandboxProvider | None = None,
    on_trial: ProgressHook | None = None,
) -> ValidationReport:
    if provider is None:
        from rome.bench.runner import sandbox_provider

        with sandbox_provider() as opened:
            return validate_tasks(tasks, load_errors, output, concurrency, opened, on_trial)
    oracle = _by_id(
        run_trials(tasks, "oracle", output / "oracle", 1, concurrency, provider=provider, on_trial=on_trial)
    )
    nop = _by_id(
        run_trials(tasks, "nop", output / "nop", 1, concurrency, provider=provider, on_trial=on_trial)
    )
    rows = [
        ValidationRow(
            task_id=t.id,
            category=t.category,
            difficulty=t.difficulty,
            oracle_reward=oracle[t.id].reward,
            nop_reward=nop[t.id].reward,
            oracle_error=oracle[t.id].error,
            nop_error=nop[t.id].error if nop[t.id].failure_mode in ("build_error", "sandbox_error") else None,
        )
        for t in tasks
    ]
    return ValidationReport(rows=rows, load_errors=load_errors)
