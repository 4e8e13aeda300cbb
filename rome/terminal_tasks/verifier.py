"""A task's verifier: guard the sandbox, copy its tests in after the agent, run them, read the reward."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from rome.terminal_tasks.bundle import (
    BUNDLE_ROOT,
    PYTEST_MOUNT,
    UV_INSTALLER_STANDIN,
    pytest_bundle,
    uv_bundle,
    verifier_path,
)
from rome.terminal_tasks.grading_guard import PYCACHE_PREFIX, Baseline, GuardableSandbox, seal_for_grading
from rome.terminal_tasks.sandbox import TrialSandbox
from rome.terminal_tasks.task import AGENT_LOGS, TESTS_MOUNT, VERIFIER_LOGS, Task


class Verdict(BaseModel):
    """What the task's tests said. `failure_mode` is set when they gave no reward to trust."""

    reward: float = 0.0
    reward_source: str | None = None
    output: str
    exit_code: int | None
    duration_sec: float
    timed_out: bool
    failure_mode: Literal["test_timeout", "verifier_error"] | None = None
    error: str | None = None
    tampered: str | None = None
    """Why the agent's sandbox could not be graded honestly (it changed the grading toolchain, or something
    it left outlived the cull): the tests were not run and the reward is 0 (see grading_guard)."""


def _test_files(task: Task) -> list[Path]:
    return [
        p
        for folder in (task.tests_dir, task.step_tests_dir)
        if folder is not None and folder.is_dir()
        for p in folder.glob("*.sh")
    ] + list(task.extra_test_files)


def uses_pytest(task: Task) -> bool:
    """Whether the task's tests run pytest (then pytest is uploaded for images that lack it)."""
    if task.grading == "pytest":
        return True
    return any("pytest" in p.read_text(errors="replace") for p in _test_files(task) if p.is_file())


_UV = re.compile(r"\buvx?\b")


def uses_uv(task: Task) -> bool:
    """Whether the task's test scripts call uv or uvx (then the bundled uv is uploaded)."""
    return any(_UV.search(p.read_text(errors="replace")) for p in _test_files(task) if p.is_file())


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


def verify(sandbox: TrialSandbox, task: Task) -> Verdict:
    """Copy the tests in (only now, after the agent), run them, and read the reward.

    On a ROCK sandbox the grading guard runs first: every process the agent left is killed, the tests' and
    the reward's folders are made anew, and a grading toolchain the agent changed makes the verdict
    `tampered` (reward 0, tests not run).

    A multi-step task's shared tests go in first and the step's own over them, so a step's file wins.
    Raises `SandboxError` when the sandbox itself fails; the tests' own failures are in the verdict.
    """
    baseline = getattr(sandbox, "grading_baseline", None)
    if isinstance(sandbox, GuardableSandbox) and isinstance(baseline, Baseline):
        started = time.monotonic()
        tampered = seal_for_grading(sandbox, baseline)  # the agent's processes gone, fresh folders
        if tampered is not None:
            return Verdict(
                reward=0.0,
                reward_source="tampered",
                output=f"not graded: {tampered}",
                exit_code=None,
                duration_sec=time.monotonic() - started,
                timed_out=False,
                error=f"tampered: {tampered}",
                tampered=tampered,
            )
        fresh = f"mkdir -p {AGENT_LOGS} {PYCACHE_PREFIX}"
        guarded_env: dict[str, str] = {"PYTHONPYCACHEPREFIX": PYCACHE_PREFIX}
    else:  # a sandbox without ROCK's runtime (plain Docker): no guard, the folders emptied by the shell
        fresh = f"rm -rf {TESTS_MOUNT} {VERIFIER_LOGS} && mkdir -p {TESTS_MOUNT} {VERIFIER_LOGS} {AGENT_LOGS}"
        guarded_env = {}
    sandbox.run(fresh, timeout=30)
    for folder in (task.tests_dir, task.step_tests_dir):
        if folder is not None and folder.is_dir() and any(folder.iterdir()):
            sandbox.upload(sorted(folder.iterdir()), TESTS_MOUNT)
    if task.extra_test_files:
        sandbox.upload(list(task.extra_test_files), TESTS_MOUNT)
    with_uv = uses_uv(task)
    # The task's [verifier.env] (a step's [steps.verifier.env]) first: what the harness sets must hold.
    env = {**task.verifier_env, "TEST_DIR": TESTS_MOUNT, "PYTHONDONTWRITEBYTECODE": "1", **guarded_env}
    prelude = ""
    if uses_pytest(task) or with_uv:
        sandbox.upload([pytest_bundle()], BUNDLE_ROOT)
        env["PYTHONPATH"] = PYTEST_MOUNT
        prelude = f"export PATH={verifier_path(with_uv)}; "
    if with_uv:
        sandbox.upload([uv_bundle()], BUNDLE_ROOT)
        prelude += f"{UV_INSTALLER_STANDIN}; "
    run = sandbox.run(prelude + task.test_command, timeout=task.verifier_timeout_sec, env=env)
    verdict = Verdict(
        output=run.output, exit_code=run.exit_code, duration_sec=run.duration_sec, timed_out=run.timed_out
    )
    if run.timed_out:
        verdict.failure_mode = "test_timeout"
        verdict.error = f"tests ran past their {task.verifier_timeout_sec:.0f} s timeout"
        return verdict
    if task.grading == "pytest":
        verdict.reward, verdict.reward_source = pytest_reward(run.output, run.exit_code)
        return verdict
    for name in ("reward.txt", "reward.json"):
        text = sandbox.read_text(f"{VERIFIER_LOGS}/{name}")
        if text is not None:
            try:
                verdict.reward, verdict.reward_source = parse_reward_file(text), name
            except (ValueError, StopIteration, TypeError):
                verdict.failure_mode = "verifier_error"
                verdict.error = f"{VERIFIER_LOGS}/{name} holds {text[:80]!r}, not a number"
            return verdict
    verdict.reward, verdict.reward_source = (1.0 if run.exit_code == 0 else 0.0), "exit-code"
    return verdict
