"""One trial: sandbox from the task image, agent under its timeout, then the task's tests under theirs."""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib.util
import json
import os
import re
import shutil
import tempfile
import time
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from rome.bench.agents import Agent, CommandRecord
from rome.bench.sandbox import SandboxError, SandboxProvider, TrialSandbox
from rome.bench.tasks import AGENT_LOGS, TESTS_MOUNT, VERIFIER_LOGS, Task

FailureMode = Literal[
    "build_error", "sandbox_error", "agent_timeout", "agent_error", "test_timeout", "verifier_error"
]

SANDBOX_TRIES = 2
PYTEST_MOUNT = "/opt/rome-bench/pytest"
# pytest and its pure-Python dependencies, uploaded so tests run with pytest in images that lack it.
BUNDLE_FORMAT = 2  # part of the bundle's cache folder name: bump it when the bundle's layout changes
PYTEST_PACKAGES = ("pytest", "_pytest", "py", "pluggy", "iniconfig", "packaging", "pygments")


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


@cache
def pytest_bundle() -> Path:
    """A folder `pytest/` holding the host's pytest and its pure-Python dependencies (with their dist-info,
    since pytest reads plugin versions), made once per process and uploaded in one piece."""
    from importlib.metadata import version

    root = (
        Path(tempfile.gettempdir()) / f"rome-bench-pytest-{version('pytest')}-v{BUNDLE_FORMAT}-{os.getuid()}"
    )
    cached = root / "pytest"
    if cached.is_dir():
        return cached
    root.mkdir(exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=root))
    bundle = scratch / "pytest"
    bundle.mkdir()
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in PYTEST_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue
        origin = Path(spec.origin)
        if origin.name != "__init__.py":
            shutil.copy2(origin, bundle / origin.name)
            continue
        shutil.copytree(origin.parent, bundle / name, ignore=skip)
        for info in origin.parent.parent.glob("*.dist-info"):
            if info.name.lower().startswith(f"{name.lower()}-"):
                shutil.copytree(info, bundle / info.name, ignore=skip)
    # A `pytest` command too: test scripts often call it rather than `python3 -m pytest`.
    shim = bundle / "bin" / "pytest"
    shim.parent.mkdir()
    shim.write_text('#!/bin/sh\nexec python3 -m pytest "$@"\n')
    shim.chmod(0o755)
    with contextlib.suppress(OSError):  # another process may have put its copy there first
        os.rename(bundle, cached)
    shutil.rmtree(scratch, ignore_errors=True)
    return cached


def uses_pytest(task: Task) -> bool:
    """Whether the task's tests run pytest (then pytest is uploaded for images that lack it)."""
    if task.grading == "pytest":
        return True
    return any(
        "pytest" in path.read_text(errors="replace")
        for path in [*task.tests_dir.glob("*.sh"), *task.extra_test_files]
        if path.is_file()
    )


_SUMMARY_LINE = re.compile(r"^(PASSED|FAILED|ERROR) ", re.MULTILINE)


def pytest_reward(output: str, exit_code: int | None) -> tuple[float, str]:
    """All tests in pytest's -rA summary passed -> 1.0; any failure or error -> 0.0; else the exit status."""
    outcomes = set(_SUMMARY_LINE.findall(output))
    if outcomes:
        return (1.0 if outcomes == {"PASSED"} else 0.0), "pytest-summary"
    return (1.0 if exit_code == 0 else 0.0), "exit-code"


def parse_reward_file(text: str) -> float:
    text = text.strip()
    if text.startswith("{"):
        data = json.loads(text)
        value = data.get("reward", next(iter(data.values()), None)) if isinstance(data, dict) else data
        return float(value)
    return float(text.split()[0])


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def verify(sandbox: TrialSandbox, task: Task, result: TrialResult) -> None:
    """Copy the tests in (only now, after the agent), run them, and read the reward."""
    fresh = f"rm -rf {TESTS_MOUNT} {VERIFIER_LOGS} && mkdir -p {TESTS_MOUNT} {VERIFIER_LOGS} {AGENT_LOGS}"
    sandbox.run(fresh, timeout=30)
    tests = sorted(task.tests_dir.iterdir()) if task.tests_dir.is_dir() else []
    sandbox.upload([*tests, *task.extra_test_files], TESTS_MOUNT)
    command = task.test_command
    if uses_pytest(task):
        sandbox.upload([pytest_bundle()], PYTEST_MOUNT.rsplit("/", 1)[0])
        command = f"export PATH={PYTEST_MOUNT}/bin:$PATH; {command}"
    env = {"TEST_DIR": TESTS_MOUNT, "PYTHONPATH": PYTEST_MOUNT, "PYTHONDONTWRITEBYTECODE": "1"}
    run = sandbox.run(command, timeout=task.verifier_timeout_sec, env=env)
    result.timings.verifier_sec = run.duration_sec
    result.verifier_output = run.output
    result.commands.append(
        CommandRecord(
            phase="verifier",
            command=task.test_command,
            exit_code=run.exit_code,
            duration_sec=run.duration_sec,
            timed_out=run.timed_out,
        )
    )
    if run.timed_out:
        result.failure_mode = "test_timeout"
        result.error = f"tests ran past their {task.verifier_timeout_sec:.0f} s timeout"
        return
    if task.grading == "pytest":
        result.reward, result.reward_source = pytest_reward(run.output, run.exit_code)
        return
    for name in ("reward.txt", "reward.json"):
        text = sandbox.read_text(f"{VERIFIER_LOGS}/{name}")
        if text is not None:
            try:
                result.reward, result.reward_source = parse_reward_file(text), name
            except (ValueError, StopIteration, TypeError):
                result.failure_mode = "verifier_error"
                result.error = f"{VERIFIER_LOGS}/{name} holds {text[:80]!r}, not a number"
            return
    result.reward, result.reward_source = (1.0 if run.exit_code == 0 else 0.0), "exit-code"


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
