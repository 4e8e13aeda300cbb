"""One trial: sandbox from the task image, agent under its timeout, then the task's tests under theirs."""

from __future__ import annotations

import datetime as dt
import time
from typing import Literal

from pydantic import BaseModel, Field

from rome.bench.agents import Agent, CommandRecord
from rome.bench.verdict import (
    AGENT_CRASHED,
    IMAGE_BUILD_FAILED,
    NETWORK_NEEDED,
    SANDBOX_LOST,
    TIMEOUT,
    VERIFIER_CRASHED,
    Verdict,
    network_failure,
    verifier_crash,
)
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


class StepResult(BaseModel):
    """One step of a multi-step trial: its own reward and verdict."""

    name: str
    reward: float = 0.0
    verdict: Verdict = "failed"
    cause: str | None = None
    failure_mode: FailureMode | None = None
    error: str | None = None
    agent_log: str = ""
    verifier_output: str = ""


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
    verdict: Verdict = "failed"
    cause: str | None = None
    failure_mode: FailureMode | None = None
    error: str | None = None
    network: str = "none"
    notes: list[str] = Field(default_factory=list)
    steps: list[StepResult] = Field(default_factory=list)
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
    """Run the task's verifier and record what it said; a verifier that could not judge (its interpreter
    or test runner missing, pytest unable to start) is a `verifier_error`, not a failed task."""
    verdict = run_verifier(sandbox, task)
    result.timings.verifier_sec += verdict.duration_sec
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
    result.reward, result.reward_source = verdict.reward, verdict.reward_source
    if verdict.failure_mode is not None:
        result.failure_mode, result.error = verdict.failure_mode, verdict.error
    elif verdict.reward < 1.0 and verdict.reward_source == "exit-code":
        crash = verifier_crash(verdict.output, verdict.exit_code)
        if crash is not None:
            result.failure_mode, result.error = "verifier_error", f"the verifier could not run: {crash}"


def classify(result: TrialResult | StepResult) -> None:
    """Set the verdict and its cause from what the trial (or step) recorded; see rome.bench.verdict."""
    mode, net = result.failure_mode, None
    if mode == "build_error":
        net = network_failure(result.error or "")
        result.verdict, result.cause = "infra_error", NETWORK_NEEDED if net else IMAGE_BUILD_FAILED
    elif mode == "sandbox_error":
        result.verdict, result.cause = "infra_error", SANDBOX_LOST
    elif mode == "verifier_error":
        net = network_failure(result.verifier_output)
        result.verdict, result.cause = "infra_error", NETWORK_NEEDED if net else VERIFIER_CRASHED
    elif result.reward >= 1.0:
        result.verdict, result.cause = "passed", None
    elif net := (mode == "agent_error" and network_failure(result.agent_log)) or network_failure(
        result.verifier_output
    ):
        result.verdict, result.cause = "infra_error", NETWORK_NEEDED
    elif mode == "agent_timeout":
        result.verdict, result.cause = "agent_error", TIMEOUT
    elif mode == "agent_error":
        result.verdict, result.cause = "agent_error", AGENT_CRASHED
    else:
        result.verdict, result.cause = "failed", TIMEOUT if mode == "test_timeout" else None
    if net and result.cause == NETWORK_NEEDED:
        result.error = f"{result.error + '; ' if result.error else ''}no network here: {net}"


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
    if not result.steps:
        classify(result)
    result.passed = result.verdict == "passed"
    result.timings.total_sec = time.monotonic() - started + build_sec
    result.finished_at = _now()
    return result


def _run_agent(agent: Agent, sandbox: TrialSandbox, task: Task, result: TrialResult) -> None:
    t1 = time.monotonic()
    try:
        outcome = agent.run(sandbox, task, timeout=task.agent_timeout_sec)
    except SandboxError:
        raise
    except Exception as exc:  # an agent crash is a result to record, not a harness failure
        outcome = None
        result.failure_mode, result.error = "agent_error", f"{type(exc).__name__}: {exc}"
    result.timings.agent_sec += time.monotonic() - t1
    if outcome is not None:
        result.agent_log = outcome.log
        result.commands.extend(outcome.commands)
        if outcome.timed_out:
            result.failure_mode = "agent_timeout"
            result.error = f"agent ran past its {task.agent_timeout_sec:.0f} s timeout"
        elif outcome.error:
            result.failure_mode, result.error = "agent_error", outcome.error


def _run_steps(task: Task, agent: Agent, sandbox: TrialSandbox, result: TrialResult) -> None:
    """Each step in order in the one sandbox: the agent on the step's instruction, then the step's tests."""
    from rome.terminal_tasks.steps import aggregate

    rewards: list[float | None] = []
    for step in task.steps:
        view = task.for_step(step)
        scratch = result.model_copy(update={"failure_mode": None, "error": None, "commands": []})
        scratch.timings = result.timings
        _run_agent(agent, sandbox, view, scratch)
        verify(sandbox, view, scratch)
        classify(scratch)
        result.commands.extend(scratch.commands)
        result.steps.append(
            StepResult(
                name=step.name,
                reward=scratch.reward,
                verdict=scratch.verdict,
                cause=scratch.cause,
                failure_mode=scratch.failure_mode,
                error=scratch.error,
                agent_log=scratch.agent_log,
                verifier_output=scratch.verifier_output,
            )
        )
        rewards.append(scratch.reward)
        below_gate = step.min_reward is not None and scratch.reward < step.min_reward
        if scratch.verdict == "infra_error" or below_gate:
            break
    rewards += [None] * (len(task.steps) - len(rewards))
    result.reward = aggregate(rewards, task.steps, task.step_reward_strategy)
    result.reward_source = f"steps ({task.step_reward_strategy})"
    result.agent_log = "\n".join(f"--- step {s.name} ---\n{s.agent_log}" for s in result.steps)
    result.verifier_output = "\n".join(f"--- step {s.name} ---\n{s.verifier_output}" for s in result.steps)
    _roll_up(result)


def _roll_up(result: TrialResult) -> None:
    """A multi-step trial's verdict: an infra error in any step decides; else passed, agent error, failed."""
    broken = next((s for s in result.steps if s.verdict == "infra_error"), None)
    agent_fault = next((s for s in result.steps if s.verdict == "agent_error"), None)
    failed = next((s for s in result.steps if s.verdict != "passed"), None)
    if broken is not None:
        result.verdict, result.cause, result.failure_mode = "infra_error", broken.cause, broken.failure_mode
        result.error = f"step {broken.name}: {broken.error}"
    elif result.reward >= 1.0:
        result.verdict, result.cause = "passed", None
    elif agent_fault is not None:
        result.verdict, result.cause = "agent_error", agent_fault.cause
        result.failure_mode = agent_fault.failure_mode
        result.error = f"step {agent_fault.name}: {agent_fault.error}"
    else:
        result.verdict, result.cause = "failed", failed.cause if failed else None
        if failed is not None and failed.error:
            result.error = f"step {failed.name}: {failed.error}"


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
    result.network = getattr(sandbox, "network_policy", "none")
    result.notes = list(getattr(sandbox, "notes", None) or [])
    try:
        if task.steps:
            _run_steps(task, agent, sandbox, result)
        else:
            _run_agent(agent, sandbox, task, result)
            verify(sandbox, task, result)
    except SandboxError as exc:
        result.steps = []
        result.failure_mode, result.error = "sandbox_error", str(exc)
    finally:
        t2 = time.monotonic()
        sandbox.close()
        result.timings.teardown_sec = time.monotonic() - t2
