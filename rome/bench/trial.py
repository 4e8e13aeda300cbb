"""One trial: sandbox from the task image, agent under its timeout, then the task's tests under theirs."""

from __future__ import annotations

import datetime as dt
import time
from typing import Literal

from pydantic import BaseModel, Field

from rome.bench.agents import Agent, CommandRecord
from rome.terminal_tasks.sandbox import SandboxError, SandboxProvider, TrialSandbox
from rome.terminal_tasks.task import Task
from rome.terminal_tasks.verifier import verify as run_verifier

FailureMode = Literal[
    "build_error", "sandbox_error", "agent_timeout", "agent_error", "test_timeout", "verifier_error"
]

SANDBOX_TRIES = 2


class Timings(BaseModel):
    build_sec: float = 0.0
    sandbox_start_sec: float = 0.0
    agent_sec: float = 0.0
    verifier_sec: float = 0.0
    teardown_sec: float = 0.0
    total_sec: float = 0.0

    @property
    def overhead_sec(self) -> float:
        return max(0.0, self.total_sec - self.build_sec - self.agent_sec - self.verifier_sec)


class TrialResult(BaseModel):
    task_id: str
    attempt: int
    agent: str
    model: str | None = None
    category: str
    difficulty: str
    instruction: str
    image: str | None = None
    reward: float = 0.0
    passed: bool = False
    failure_mode: FailureMode | None = None
    error: str | None = None
    timings: Timings = Field(default_factory=Timings)
    commands: list[CommandRecord] = Field(default_factory=list)
    agent_log: str = ""
    verifier_output: str = ""
    reward_source: str | None = None
    sandbox_retries: list[str] = Field(default_factory=list)
    started_at: str = ""
    finished_at: str = ""


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def verify(sandbox: TrialSandbox, task: Task, result: TrialResult) -> None:
    """Run the task's tests and record their verdict in the trial's result."""
    verdict = run_verifier(sandbox, task)
    result.timings.verifier_sec = verdict.duration_sec
    result.verifier_output = verdict.output
    result.commands.append(
        CommandRecord(
            phase="verifier",
            command=task.test_command,
            exit_code=verdict.exit_code,
            duration_sec=verdict.duration_sec,
            timed_out=verdict.timed_out,
        )
    )
    if verdict.failure_mode is not None:
        result.failure_mode, result.error = verdict.failure_mode, verdict.error
    result.reward, result.reward_source = verdict.reward, verdict.reward_source


def run_trial(
    task: Task,
    attempt: int,
    agent: Agent,
    provider: SandboxProvider,
    image: str | None,
    build_error: str | None = None,
    build_sec: float = 0.0,
    model: str | None = None,
) -> TrialResult:
    """Run one trial end to end. Never raises for the task's or the agent's faults: they are recorded.

    A sandbox that dies under the trial (an infrastructure fault, not the agent's) is replaced and the trial
    run again, up to SANDBOX_TRIES times; the errors of the lost sandboxes stay in `sandbox_retries`.
    """
    started = time.monotonic()
    lost: list[str] = []
    while True:
        result = TrialResult(
            task_id=task.id,
            attempt=attempt,
            agent=agent.name,
            model=model,
            category=task.category,
            difficulty=task.difficulty,
            instruction=task.instruction,
            image=image,
            started_at=_now(),
        )
        result.timings.build_sec = build_sec
        if image is None:
            result.failure_mode, result.error = "build_error", build_error or "the task image did not build"
        else:
            _run_in_sandbox(task, agent, provider, image, result)
        if result.failure_mode != "sandbox_error" or len(lost) + 1 >= SANDBOX_TRIES:
            break
        lost.append(result.error or "sandbox lost")
    result.sandbox_retries = lost
    result.passed = result.failure_mode not in ("build_error", "sandbox_error") and result.reward >= 1.0
    result.timings.total_sec = time.monotonic() - started + build_sec
    result.finished_at = _now()
    return result


def _run_in_sandbox(
    task: Task, agent: Agent, provider: SandboxProvider, image: str, result: TrialResult
) -> None:
    t0 = time.monotonic()
    try:
        sandbox = provider.open(image, task)
    except SandboxError as exc:
        result.failure_mode, result.error = "sandbox_error", str(exc)
        return
    result.timings.sandbox_start_sec = time.monotonic() - t0
    try:
        t1 = time.monotonic()
        try:
            outcome = agent.run(sandbox, task, timeout=task.agent_timeout_sec)
        except Exception as exc:  # an agent crash is a result to record, not a harness failure
            outcome = None
            result.failure_mode, result.error = "agent_error", f"{type(exc).__name__}: {exc}"
        result.timings.agent_sec = time.monotonic() - t1
        if outcome is not None:
            result.agent_log, result.commands = outcome.log, list(outcome.commands)
            if outcome.timed_out:
                result.failure_mode = "agent_timeout"
                result.error = f"agent ran past its {task.agent_timeout_sec:.0f} s timeout"
            elif outcome.error:
                result.failure_mode, result.error = "agent_error", outcome.error
        verify(sandbox, task, result)
    except SandboxError as exc:
        result.failure_mode, result.error = "sandbox_error", str(exc)
    finally:
        t2 = time.monotonic()
        sandbox.close()
        result.timings.teardown_sec = time.monotonic() - t2
