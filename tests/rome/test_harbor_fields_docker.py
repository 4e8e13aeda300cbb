"""The Harbor fixture tasks (tests/rome/harbor_tasks) on real Docker through a private ROCK fleet: the oracle
scores 1.0 on each (their tests check step env, healthchecks, workdir set-up and step isolation from inside
the sandbox), nop fails them, and the artifacts land in the trial folder."""

import shutil
from pathlib import Path

import pytest

from rome.bench.runner import trial_path
from rome.bench.trial import TrialResult
from rome.bench.validate import validate_tasks
from rome.terminal_tasks.sandbox import SandboxProvider
from rome.terminal_tasks.task import load_tasks

pytestmark = [pytest.mark.docker, pytest.mark.slow]

FIXTURES = Path(__file__).parent / "harbor_tasks"


@pytest.fixture
def provider(rock_provider: SandboxProvider) -> SandboxProvider:
    """The session's private fleet (tests/conftest.py): these tests only run trials on it."""
    return rock_provider


def trial(output: Path, agent: str, task_id: str) -> TrialResult:
    return TrialResult.model_validate_json(trial_path(output / agent, task_id, 0).read_text())


def test_the_oracle_passes_every_harbor_fixture_and_nop_fails_it(provider, tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("ROME_BENCH_FIXTURE_UNSET", raising=False)
    suite = load_tasks(FIXTURES)
    assert not suite.errors
    report = validate_tasks(suite.tasks, suite.errors, tmp_path, concurrency=2, provider=provider)
    assert [(r.task_id, r.oracle_reward, r.nop_reward, r.cannot_run) for r in report.rows] == [
        ("harbor-environment-features", 1.0, 0.0, None),
        ("harbor-steps-features", 1.0, 0.0, None),
    ], [(r.task_id, r.problem) for r in report.rows]

    steps = trial(tmp_path, "oracle", "harbor-steps-features")
    assert [(s.name, s.reward) for s in steps.steps] == [("scaffold", 1.0), ("greet", 1.0)]
    assert any("step scaffold healthcheck healthy (3 probe(s)" in h for h in steps.healthchecks)
    # The agent phase asked for no network: the sandbox (packages, with the seeded cache) is narrowed for it.
    assert (steps.network_agent, steps.network_verifier) == ("none", steps.network)
    art = Path(steps.artifacts_dir or "")
    assert (art / "steps" / "scaffold" / "app" / "config.txt").read_text() == "Ada\n"
    assert (art / "steps" / "scaffold" / "scaffold-out" / "keep.txt").is_file()
    assert not (art / "steps" / "scaffold" / "scaffold-out" / "skip.tmp").exists()  # excluded
    assert (art / "steps" / "scaffold" / "scaffold.log").read_text() == "scaffold verified\n"
    assert (art / "app" / "final.txt").read_text() == "Hello, Ada!\n"
    # The last step's /logs/artifacts goes to its own folder only, not again with the task's artifacts.
    assert (art / "steps" / "greet" / "greet.log").is_file() and not (art / "greet.log").exists()

    # nop: the scaffold step fails its min_reward, so the greet step never runs.
    stopped = trial(tmp_path, "nop", "harbor-steps-features")
    assert [(s.name, s.reward, s.stopped_here) for s in stopped.steps] == [
        ("scaffold", 0.0, "reward 0 < min_reward 1"),
    ]

    single = trial(tmp_path, "oracle", "harbor-environment-features")
    assert (single.network_agent, single.network_verifier) == ("none", single.network)
    assert single.healthchecks == [single.healthchecks[0]] and "healthy (3 probe(s)" in single.healthchecks[0]
    assert (Path(single.artifacts_dir or "") / "report" / "summary.txt").read_text() == "done\n"


def test_a_healthcheck_that_never_passes_is_an_infra_error(provider, tmp_path) -> None:
    task_dir = tmp_path / "tasks" / "never-ready"
    shutil.copytree(FIXTURES / "harbor-environment-features", task_dir)
    toml = task_dir / "task.toml"
    toml.write_text(
        toml.read_text()
        .replace("start_period_sec = 60", "start_period_sec = 0")
        .replace("start_interval_sec = 0.2", "interval_sec = 0.2")
    )
    suite = load_tasks(tmp_path / "tasks")
    report = validate_tasks(suite.tasks, suite.errors, tmp_path / "out", provider=provider)
    (row,) = report.rows
    assert row.cannot_run is not None and "environment not ready" in row.cannot_run
    assert "healthcheck unhealthy after 1" in row.cannot_run


def test_a_uv_grader_runs_in_an_image_without_python(provider, tmp_path) -> None:
    """uv cannot download a Python here: the bundle installs the distribution's python3 from the cache."""
    world = Path(__file__).resolve().parents[2] / "rome" / "tasks" / "fixtures"
    task_dir = tmp_path / "tasks" / "uv-no-python"
    shutil.copytree(world / "uv-curl-ctrf", task_dir)
    (task_dir / "environment" / "Dockerfile").write_text("FROM ubuntu:24.04\nWORKDIR /app\n")
    suite = load_tasks(tmp_path / "tasks")
    report = validate_tasks(suite.tasks, suite.errors, tmp_path / "out", provider=provider)
    (row,) = report.rows
    assert (row.oracle_reward, row.nop_reward, row.cannot_run) == (1.0, 0.0, None), row.problem
