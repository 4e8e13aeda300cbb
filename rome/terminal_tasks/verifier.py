"""A task's verifier: copy its tests into the sandbox after the agent, run them, read the reward."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import shutil
import tempfile
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from rome.terminal_tasks.sandbox import TrialSandbox
from rome.terminal_tasks.task import AGENT_LOGS, TESTS_MOUNT, VERIFIER_LOGS, Task

PYTEST_MOUNT = "/opt/rome-bench/pytest"
# pytest and its pure-Python dependencies, uploaded so tests run with pytest in images that lack it.
BUNDLE_FORMAT = 2  # part of the bundle's cache folder name: bump it when the bundle's layout changes
PYTEST_PACKAGES = ("pytest", "_pytest", "py", "pluggy", "iniconfig", "packaging", "pygments")


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


def verify(sandbox: TrialSandbox, task: Task) -> Verdict:
    """Copy the tests in (only now, after the agent), run them, and read the reward.

    Raises `SandboxError` when the sandbox itself fails; the tests' own failures are in the verdict.
    """
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
