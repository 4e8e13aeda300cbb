"""`rome data validate`: rome-bench's validation (the oracle passes, the nop agent fails) plus a flakiness
check (the oracle runs a second time and must pass again). The verdicts go to `validation.json` in the task
set: later stages use only the valid instances, and every invalid one is listed with its reasons."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from rome.bench.runner import ProgressHook, build_all, run_trials
from rome.bench.validate import validate_tasks
from rome.data.taskset import read_manifest, write_atomic
from rome.terminal_tasks.sandbox import SandboxProvider
from rome.terminal_tasks.task import load_tasks

VALIDATION = "validation.json"


class Verdict(BaseModel):
    task_id: str
    valid: bool
    reasons: list[str] = Field(default_factory=list)
    oracle_rewards: list[float] = Field(default_factory=list)
    nop_reward: float | None = None
    judged: bool = Field(
        True,
        description="False when this machine could not judge the instance (no Docker, an image that did not "
        "build, a lost sandbox): not a verdict on the task, and the next validation retries it.",
    )


class Validation(BaseModel):
    verdicts: dict[str, Verdict]

    @property
    def valid(self) -> list[str]:
        return sorted(k for k, v in self.verdicts.items() if v.judged and v.valid)

    @property
    def invalid(self) -> dict[str, list[str]]:
        return {k: v.reasons for k, v in sorted(self.verdicts.items()) if v.judged and not v.valid}

    @property
    def unjudged(self) -> dict[str, list[str]]:
        """Instances this machine could not judge, with why: they need another validation, not new knobs."""
        return {k: v.reasons for k, v in sorted(self.verdicts.items()) if not v.judged}

    @property
    def flaky(self) -> list[str]:
        return sorted(k for k, v in self.verdicts.items() if any("flaky" in r for r in v.reasons))


def validate_taskset(
    root: Path,
    output: Path,
    provider: SandboxProvider,
    concurrency: int = 2,
    on_trial: ProgressHook | None = None,
    only: list[str] | None = None,
) -> Validation:
    """Validate the instances of the task set `root` (all, or `only` these, keeping the verdicts already in
    validation.json for the others), trials under `output`, and write validation.json."""
    manifest = read_manifest(root)
    suite = load_tasks(root, only)
    # The three passes use the same images: asked of the fleet once (a pass over a task set's images already
    # built still costs an ensure call each).
    built = build_all(suite.tasks, workers=min(concurrency, 2), provider=provider)
    report = validate_tasks(
        suite.tasks, suite.errors, output, concurrency, provider, on_trial=on_trial, built=built
    )
    again = {
        t.task_id: t
        for t in run_trials(
            suite.tasks,
            "oracle",
            output / "oracle-again",
            1,
            concurrency,
            provider=provider,
            on_trial=on_trial,
            built=built,
        )
    }
    previous = read_validation(root) if only is not None else None
    verdicts: dict[str, Verdict] = dict(previous.verdicts) if previous is not None else {}
    for row in report.rows:
        second = again[row.task_id]
        if row.cannot_run is not None or second.verdict == "infra_error":
            why = row.problem if row.cannot_run is not None else f"cannot run here, because {second.error}"
            verdicts[row.task_id] = Verdict(task_id=row.task_id, valid=False, reasons=[why], judged=False)
            continue
        reasons = [row.problem] if not row.ok else []
        first_passed = row.oracle_reward >= 1.0 and row.oracle_error is None
        if first_passed != second.passed:
            reasons.append(
                f"flaky: the oracle {'passed' if first_passed else 'failed'} once and "
                f"{'passed' if second.passed else 'failed'} once"
                + (f" ({second.error})" if second.error else "")
            )
        verdicts[row.task_id] = Verdict(
            task_id=row.task_id,
            valid=not reasons,
            reasons=reasons,
            oracle_rewards=[row.oracle_reward, second.reward],
            nop_reward=row.nop_reward,
        )
    for error in report.load_errors:
        verdicts[error.task_dir.name] = Verdict(
            task_id=error.task_dir.name, valid=False, reasons=[f"does not load: {error}"]
        )
    for task_id in manifest.instances:
        verdicts.setdefault(
            task_id, Verdict(task_id=task_id, valid=False, reasons=["task folder is missing"])
        )
    validation = Validation(verdicts=verdicts)
    write_atomic(root / VALIDATION, validation.model_dump_json(indent=2) + "\n")
    return validation


def read_validation(root: Path) -> Validation | None:
    path = root / VALIDATION
    return Validation.model_validate_json(path.read_text()) if path.is_file() else None
