"""One trial: sandbox from the task image, agent under its timeout, then the task's tests under theirs.

Around them, the Harbor task features: the environment's healthcheck before the first agent; per step, its
workdir/ files and setup.sh, then its healthcheck; artifacts copied into the trial folder after the tests;
and between steps the previous step's /tests, /logs/verifier and /solution removed, so the next step's agent
never sees another step's tests or reward.
"""

from __future__ import annotations

import datetime as dt
import shlex
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from rock.sdk import ImageInfo
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
from rome.terminal_tasks.artifacts import ARTIFACTS_MOUNT
from rome.terminal_tasks.artifacts import collect as collect_artifacts
from rome.terminal_tasks.healthcheck import wait_healthy
from rome.terminal_tasks.network import phase_policies
from rome.terminal_tasks.sandbox import CommandResult, SandboxError, SandboxProvider, TrialSandbox
from rome.terminal_tasks.task import SOLUTION_MOUNT, TESTS_MOUNT, VERIFIER_LOGS, Task
from rome.terminal_tasks.verifier import verify as run_verifier

FailureMode = Literal[
    "build_error",
    "sandbox_error",
    "setup_error",
    "agent_timeout",
    "agent_error",
    "test_timeout",
    "verifier_error",
]

SANDBOX_TRIES = 2
# The cause of a `setup_error`: a step's setup.sh failed or a healthcheck never passed.
NOT_READY = "environment not ready"
# Removed before each step's agent: what the previous step's verifier and oracle left behind.
STEP_LEFTOVERS = (TESTS_MOUNT, VERIFIER_LOGS, SOLUTION_MOUNT, ARTIFACTS_MOUNT)


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
    # The step's reward.json metrics (or {"reward": r}), what min_reward gates on.
    metrics: dict[str, float] = Field(default_factory=dict)
    stopped_here: str | None = None


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
    # The network the sandbox was made with, and what each phase had in it (see network.phase_policies).
    network: str = "none"
    network_agent: str = "none"
    network_verifier: str = "none"
    healthchecks: list[str] = Field(default_factory=list)
    # Relative to the trial's artifacts folder (trials/<task>__<attempt>/artifacts).
    artifacts_dir: str | None = None
    notes: list[str] = Field(default_factory=list)
    steps: list[StepResult] = Field(default_factory=list)
    timings: Timings = Field(default_factory=Timings)
    commands: list[CommandRecord] = Field(default_factory=list)
    agent_log: str = ""
    verifier_output: str = ""
    reward_source: str | None = None
    sandbox_retries: list[str] = Field(default_factory=list)
    # The agent's chat history, for its ATIF trajectory (agent/trajectory.json); not in the trial's JSON.
    transcript: list[dict[str, Any]] = Field(default_factory=list, exclude=True)
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
    elif mode == "setup_error":
        result.verdict, result.cause = "infra_error", NOT_READY
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
    image: ImageInfo | None,
    build_error: str | None = None,
    build_sec: float = 0.0,
    model: str | None = None,
    artifacts_dir: Path | None = None,
) -> TrialResult:
    """Run one trial end to end. Never raises for the task's or the agent's faults: they are recorded.

    A sandbox that dies under the trial (an infrastructure fault, not the agent's) is replaced and the trial
    run again, up to SANDBOX_TRIES times; the errors of the lost sandboxes stay in `sandbox_retries`.
    Artifacts go under `artifacts_dir` (none are collected without one).
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
            image=image.tag if image is not None else None,
            started_at=_now(),
        )
        result.timings.build_sec = build_sec
        if image is None:
            result.failure_mode, result.error = "build_error", build_error or "the task image did not build"
        else:
            _run_in_sandbox(task, agent, provider, image, result, artifacts_dir)
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


class _AgentView:
    """The sandbox as the agent phase sees it: every command starts in the task's workdir (when it names
    one) with the task's [environment.env]. Agents that drive the sandbox another way (iflow's ROCK
    executor) reach the sandbox itself through attribute access."""

    def __init__(self, sandbox: TrialSandbox, task: Task) -> None:
        self._sandbox, self._env, self._workdir = sandbox, task.agent_env, task.workdir

    def run(self, command: str, timeout: float, env: dict[str, str] | None = None) -> CommandResult:
        if self._workdir:
            command = f"mkdir -p {shlex.quote(self._workdir)} && cd {shlex.quote(self._workdir)} && {command}"
        merged = {**self._env, **(env or {})}
        return self._sandbox.run(command, timeout=timeout, env=merged or None)

    @property
    def workdir(self) -> str | None:
        """Where agents that run their own commands (iflow's executor) should start."""
        return self._workdir or getattr(self._sandbox, "workdir", None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sandbox, name)


def _run_agent(agent: Agent, sandbox: TrialSandbox, task: Task, result: TrialResult) -> None:
    t1 = time.monotonic()
    try:
        outcome = agent.run(_AgentView(sandbox, task), task, timeout=task.agent_timeout_sec)  # type: ignore[arg-type]
    except SandboxError:
        raise
    except Exception as exc:  # an agent crash is a result to record, not a harness failure
        outcome = None
        result.failure_mode, result.error = "agent_error", f"{type(exc).__name__}: {exc}"
    result.timings.agent_sec += time.monotonic() - t1
    if outcome is not None:
        result.agent_log = outcome.log
        result.commands.extend(outcome.commands)
        result.transcript.extend(outcome.messages)
        if outcome.timed_out:
            result.failure_mode = "agent_timeout"
            result.error = f"agent ran past its {task.agent_timeout_sec:.0f} s timeout"
        elif outcome.error:
            result.failure_mode, result.error = "agent_error", outcome.error


def _enter_phase(
    sandbox: TrialSandbox, task: Task, phase: Literal["agent", "verifier"], result: TrialResult
) -> None:
    """Give the sandbox the phase's network (when it can switch in place) and record what the phase had."""
    switch = getattr(sandbox, "set_network", None)
    policy = phase_policies(task.network, getattr(sandbox, "network_policy", "none"), switch is not None)[
        phase
    ]
    if switch is not None:
        policy = switch(policy)
    setattr(result, f"network_{phase}", policy)


def _ready(sandbox: TrialSandbox, task: Task, where: str, result: TrialResult) -> bool:
    """The healthcheck of `task` (environment or step view) passed, or there is none."""
    if task.healthcheck is None:
        return True
    report = wait_healthy(sandbox, task.healthcheck)
    result.healthchecks.append(report.describe(where))
    if not report.healthy:
        result.failure_mode, result.error = "setup_error", report.describe(where)
    return report.healthy


def _workdir(sandbox: TrialSandbox, task: Task) -> str:
    if task.workdir:
        return task.workdir
    found = sandbox.run("pwd", timeout=30).output.strip().splitlines()
    return found[-1] if found and found[-1].startswith("/") else "/app"


def _stage_workdir(sandbox: TrialSandbox, task: Task, name: str, result: TrialResult) -> bool:
    """A step's workdir/ files into the environment's workdir, then its setup.sh run there and removed."""
    folder = task.step_workdir_dir
    if folder is None:
        return True
    workdir = _workdir(sandbox, task)
    entries = sorted(folder.iterdir())
    if entries:
        sandbox.upload(entries, workdir)
    if not (folder / "setup.sh").is_file():
        return True
    here = shlex.quote(workdir)
    command = f"cd {here} && bash ./setup.sh; status=$?; rm -f {here}/setup.sh; exit $status"
    run = sandbox.run(command, timeout=task.agent_timeout_sec)
    result.commands.append(
        CommandRecord(
            phase="setup",
            command=f"bash {workdir}/setup.sh",
            exit_code=run.exit_code,
            duration_sec=run.duration_sec,
            timed_out=run.timed_out,
        )
    )
    if run.exit_code == 0 and not run.timed_out:
        return True
    result.failure_mode = "setup_error"
    result.error = f"step {name}: workdir/setup.sh exited with {run.exit_code}: {run.output.strip()[-300:]}"
    return False


def _metrics(sandbox: TrialSandbox, reward: float) -> dict[str, float]:
    """The step's metrics for min_reward: reward.json's numeric entries, and always `reward`."""
    import json

    metrics: dict[str, float] = {}
    text = sandbox.read_text(f"{VERIFIER_LOGS}/reward.json")
    if text:
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, dict):
            metrics = {k: float(v) for k, v in data.items() if isinstance(v, int | float)}
    return {**metrics, "reward": reward}


def _collect(
    sandbox: TrialSandbox, task: Task, into: Path | None, result: TrialResult, top: Path | None
) -> None:
    if into is None or top is None:
        return
    result.notes += collect_artifacts(sandbox, task.artifacts, into)
    if into.exists():
        result.artifacts_dir = str(top)


def _run_steps(
    task: Task, agent: Agent, sandbox: TrialSandbox, result: TrialResult, artifacts_dir: Path | None
) -> None:
    """Each step in order in the one sandbox: set-up, healthcheck, the agent on the step's instruction, then
    the step's tests; the previous step's tests, reward and oracle are removed before the next agent."""
    from rome.terminal_tasks.steps import aggregate

    rewards: list[float | None] = []
    for index, step in enumerate(task.steps):
        view = task.for_step(step)
        scratch = result.model_copy(
            update={"failure_mode": None, "error": None, "commands": [], "healthchecks": [], "notes": []}
        )
        scratch.timings = result.timings
        if index:
            sandbox.run("rm -rf " + " ".join(STEP_LEFTOVERS), timeout=30)
        metrics: dict[str, float] = {}
        if _stage_workdir(sandbox, view, step.name, scratch) and _ready(
            sandbox, view, f"step {step.name}", scratch
        ):
            _enter_phase(sandbox, task, "agent", result)
            _run_agent(agent, sandbox, view, scratch)
            _enter_phase(sandbox, task, "verifier", result)
            verify(sandbox, view, scratch)
            metrics = _metrics(sandbox, scratch.reward)
            step_dir = artifacts_dir / "steps" / step.name if artifacts_dir else None
            _collect(sandbox, view, step_dir, scratch, artifacts_dir)
            if step_dir is not None:  # collected into the step's folder: not again with the task's
                sandbox.run(f"rm -rf {ARTIFACTS_MOUNT}", timeout=30)
        classify(scratch)
        result.commands.extend(scratch.commands)
        result.healthchecks.extend(scratch.healthchecks)
        result.notes.extend(scratch.notes)
        result.artifacts_dir = result.artifacts_dir or scratch.artifacts_dir
        gate = step.below_gate(metrics) if scratch.verdict != "infra_error" else None
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
                metrics=metrics,
                stopped_here=gate,
            )
        )
        rewards.append(scratch.reward)
        if scratch.verdict == "infra_error" or gate:
            break
    _collect(sandbox, task, artifacts_dir, result, artifacts_dir)
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
    task: Task,
    agent: Agent,
    provider: SandboxProvider,
    image: ImageInfo,
    result: TrialResult,
    artifacts_dir: Path | None,
) -> None:
    t0 = time.monotonic()
    try:
        sandbox = provider.open(image, task)
    except SandboxError as exc:
        result.failure_mode, result.error = "sandbox_error", str(exc)
        return
    result.timings.sandbox_start_sec = time.monotonic() - t0
    result.network = getattr(sandbox, "network_policy", "none")
    result.notes = list(image.notes) + list(getattr(sandbox, "notes", None) or [])
    try:
        if not _ready(sandbox, task, "environment", result):
            return
        if task.steps:
            _run_steps(task, agent, sandbox, result, artifacts_dir)
        else:
            _enter_phase(sandbox, task, "agent", result)
            _run_agent(agent, sandbox, task, result)
            _enter_phase(sandbox, task, "verifier", result)
            verify(sandbox, task, result)
            _collect(sandbox, task, artifacts_dir, result, artifacts_dir)
    except SandboxError as exc:
        result.steps = []
        result.failure_mode, result.error = "sandbox_error", str(exc)
    finally:
        t2 = time.monotonic()
        sandbox.close()
        result.timings.teardown_sec = time.monotonic() - t2
