"""`rome-bench` from the command line, as a user runs it."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rome.bench.cli import DEFAULT_TASKS


def rome_bench(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", "from rome.bench.cli import app; app()", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


def test_help_is_instant_and_lists_commands() -> None:
    run = rome_bench("--help")
    assert run.returncode == 0 and "terminal-pro" in run.stdout and "validate" in run.stdout


def test_unknown_agent_and_task_are_refused(tmp_path: Path) -> None:
    run = rome_bench("terminal-pro", "--agent", "gpt", "--output", str(tmp_path))
    assert run.returncode == 2 and "unknown agent 'gpt'" in run.stdout
    run = rome_bench("terminal-pro", "--task-id", "no-such-task", "--output", str(tmp_path))
    assert run.returncode == 2 and "no-such-task" in run.stderr


@pytest.mark.docker
@pytest.mark.slow
def test_terminal_pro_run_writes_results_report_and_charts(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = [
        "terminal-pro",
        "--agent",
        "oracle",
        "--sandbox",
        "docker",
        "--output",
        str(out),
        "--concurrency",
        "2",
    ]
    args += ["--task-id", "nim-winning-moves", "--task-id", "knn-classifier", "--n-attempts", "2"]
    run = rome_bench(*args)
    assert run.returncode == 0, run.stdout + run.stderr
    trials = sorted(p.name for p in (out / "trials").glob("*.json"))
    assert trials == [f"{t}__{a}.json" for t in ("knn-classifier", "nim-winning-moves") for a in (0, 1)]
    trial = json.loads((out / "trials" / "knn-classifier__0.json").read_text())
    assert trial["reward"] == 1.0 and trial["instruction"].startswith("`/app/train.csv`")
    assert {c["phase"] for c in trial["commands"]} == {"agent", "verifier"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["overall"]["pass_at_1"] == 1.0 and summary["overall"]["pass_at_k"]["2"] == 1.0
    assert set(summary["by_category"]) == {"games", "machine-learning"}
    assert "| games | 1 | 2 | 1.000 |" in (out / "report.md").read_text()
    assert sorted(p.name for p in (out / "charts").glob("*.png")) == [
        "all-domains.png",
        "games.png",
        "machine-learning.png",
    ]
    # The same folder with other settings is refused; with the same settings it resumes and runs nothing.
    assert rome_bench(*[a if a != "oracle" else "nop" for a in args]).returncode == 2
    again = rome_bench(*args)
    assert again.returncode == 0 and "resuming" in again.stdout


@pytest.mark.docker
@pytest.mark.slow
def test_validate_exits_non_zero_on_a_broken_task(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    broken = tasks / "always-passes"
    (broken / "environment").mkdir(parents=True)
    (broken / "tests").mkdir()
    (broken / "solution").mkdir()
    (broken / "task.toml").write_text('[metadata]\ncategory = "x"\n')
    (broken / "instruction.md").write_text("Nothing to do.\n")
    (broken / "environment" / "Dockerfile").write_text("FROM debian:bookworm\n")
    (broken / "tests" / "test.sh").write_text("mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt\n")
    (broken / "solution" / "solve.sh").write_text("true\n")
    (tasks / "malformed").mkdir()
    (tasks / "malformed" / "task.toml").write_text("[agent]\ntimeout_sec = 0\n")
    run = rome_bench("validate", str(tasks), "--sandbox", "docker", "--output", str(tmp_path / "v"))
    assert run.returncode == 1
    assert "nop passes" in run.stdout and "malformed" in run.stdout
    assert DEFAULT_TASKS.is_dir()
