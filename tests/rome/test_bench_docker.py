"""rome-bench on real Docker through a private ROCK fleet: suite sample, failure modes, concurrency, resume.

CI validates this fixed sample; `benchmarks/bench_throughput.py --validate-all` validates the whole suite
(64 trials, about 80 s after the image builds on 2 cores).
"""

import re
from pathlib import Path

import pytest

from rome.bench.cli import DEFAULT_TASKS
from rome.bench.runner import run_trials, trial_path
from rome.bench.validate import validate_tasks
from rome.terminal_tasks.sandbox import SandboxProvider
from rome.terminal_tasks.task import load_tasks

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# One task per grading path: test.sh + Python checks, a bash-only verifier on debian:bookworm, pytest
# test_outputs.py, a debugging task, and a task whose truth is regenerated only inside the tests.
SAMPLE = ["csv-sales-rollup", "find-large-files", "lru-cache-eviction", "salted-hash-audit", "semver-sort"]


@pytest.fixture
def provider(rock_provider: SandboxProvider) -> SandboxProvider:
    """The session's private fleet (tests/conftest.py): these tests only run trials on it."""
    return rock_provider


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def harbor(
    root: Path,
    name: str,
    solve: str,
    test: str,
    agent_sec: float = 60,
    verifier_sec: float = 60,
    dockerfile: str = "FROM python:3.11-slim\nWORKDIR /app\n",
) -> None:
    d = root / name
    write(
        d / "task.toml",
        f'[metadata]\ncategory = "x"\ndifficulty = "easy"\n[agent]\ntimeout_sec = {agent_sec}\n'
        f"[verifier]\ntimeout_sec = {verifier_sec}\n",
    )
    write(d / "instruction.md", f"Task {name}.\n")
    write(d / "environment" / "Dockerfile", dockerfile)
    write(d / "tests" / "test.sh", test)
    write(d / "solution" / "solve.sh", solve)


REWARD_IF_DONE = (
    "mkdir -p /logs/verifier\n"
    "cd /logs/verifier\n"
    "if [ -f /app/done ]; then echo 1 > reward.txt; else echo 0 > reward.txt; fi\n"
)


def test_suite_sample_validates(provider, tmp_path) -> None:
    suite = load_tasks(DEFAULT_TASKS, SAMPLE)
    report = validate_tasks(suite.tasks, suite.errors, tmp_path, concurrency=2, provider=provider)
    assert [(r.task_id, r.oracle_reward, r.nop_reward) for r in report.rows] == [
        (t, 1.0, 0.0) for t in SAMPLE
    ]
    assert report.ok


def test_terminal_bench_layout_runs(provider, tmp_path) -> None:
    d = tmp_path / "tasks" / "tb-task"
    write(
        d / "task.yaml",
        "instruction: Write 42 to /app/answer.\ndifficulty: easy\ncategory: legacy\n"
        "max_agent_timeout_sec: 60\nmax_test_timeout_sec: 60\n",
    )
    write(d / "Dockerfile", "FROM python:3.11-slim\nWORKDIR /app\n")
    write(d / "solution.sh", "echo 42 > answer\n")  # relative: runs in the image's WORKDIR
    # `pytest` as a command: the harness brings pytest into images that lack it.
    write(d / "run-tests.sh", "cd $TEST_DIR && pytest -rA test_outputs.py\n")
    write(
        d / "tests" / "test_outputs.py",
        "def test_answer():\n    assert open('/app/answer').read().strip() == '42'\n",
    )
    suite = load_tasks(tmp_path / "tasks")
    report = validate_tasks(suite.tasks, suite.errors, tmp_path / "out", concurrency=2, provider=provider)
    assert [(r.oracle_reward, r.nop_reward) for r in report.rows] == [(1.0, 0.0)]


def test_failure_modes_are_recorded(provider, tmp_path) -> None:
    tasks = tmp_path / "tasks"
    harbor(
        tasks,
        "build-error",
        "touch /app/done\n",
        REWARD_IF_DONE,
        dockerfile="FROM python:3.11-slim\nRUN echo broken-step && exit 3\n",
    )
    harbor(tasks, "agent-timeout", "sleep 60; touch /app/done\n", REWARD_IF_DONE, agent_sec=2)
    harbor(tasks, "agent-error", "touch /app/done; exit 7\n", REWARD_IF_DONE)
    harbor(tasks, "test-timeout", "touch /app/done\n", "sleep 60\n" + REWARD_IF_DONE, verifier_sec=2)
    harbor(tasks, "passes", "touch /app/done\n", REWARD_IF_DONE)
    write(tasks / "malformed" / "task.toml", "[agent]\ntimeout_sec = 'soon'\n")
    suite = load_tasks(tasks)
    assert [(e.task_dir.name, e.field) for e in suite.errors] == [("malformed", "[agent].timeout_sec")]
    trials = {
        t.task_id: t
        for t in run_trials(suite.tasks, "oracle", tmp_path / "out", concurrency=4, provider=provider)
    }
    assert trials["build-error"].failure_mode == "build_error" and "broken-step" in (
        trials["build-error"].error or ""
    )
    assert trials["agent-timeout"].failure_mode == "agent_timeout" and trials["agent-timeout"].reward == 0.0
    assert trials["agent-error"].failure_mode == "agent_error" and "status 7" in (
        trials["agent-error"].error or ""
    )
    assert trials["agent-error"].reward == 1.0  # the verifier still ran and saw the work done
    assert trials["test-timeout"].failure_mode == "test_timeout" and not trials["test-timeout"].passed
    assert trials["passes"].failure_mode is None and trials["passes"].passed
    assert all(trial_path(tmp_path / "out", t.task_id, 0).is_file() for t in trials.values())


def test_concurrent_trials_match_sequential(provider, tmp_path) -> None:
    suite = load_tasks(DEFAULT_TASKS, SAMPLE[:4])

    def outcomes(concurrency: int) -> list[tuple]:
        trials = run_trials(
            suite.tasks, "oracle", tmp_path / f"c{concurrency}", 2, concurrency, provider=provider
        )
        return [(t.task_id, t.attempt, t.reward, t.failure_mode, t.verifier_output) for t in trials]

    sequential = outcomes(1)
    assert len(sequential) == 8 and all(o[2] == 1.0 for o in sequential)
    assert outcomes(4) == sequential


def test_resume_runs_only_missing_trials(provider, tmp_path) -> None:
    suite = load_tasks(DEFAULT_TASKS, ["nim-winning-moves"])
    first = run_trials(suite.tasks, "nop", tmp_path, 2, 2, provider=provider)
    path = trial_path(tmp_path, "nim-winning-moves", 1)
    kept = trial_path(tmp_path, "nim-winning-moves", 0).read_text()
    path.unlink()
    second = run_trials(suite.tasks, "nop", tmp_path, 2, 2, provider=provider)
    assert trial_path(tmp_path, "nim-winning-moves", 0).read_text() == kept
    assert path.is_file()
    assert (
        [(t.attempt, t.reward) for t in second]
        == [(t.attempt, t.reward) for t in first]
        == [(0, 0.0), (1, 0.0)]
    )


NIM_SOLUTION = """python3 - <<'EOF'
out = []
for line in open('/app/positions.txt'):
    heaps = list(map(int, line.split()))
    x = 0
    for h in heaps:
        x ^= h
    i = next((i for i, h in enumerate(heaps) if h ^ x < h), None)
    out.append('LOSE' if x == 0 else f'{i} {heaps[i] - (heaps[i] ^ x)}')
open('/app/moves.txt', 'w').write('\\n'.join(out) + '\\n')
EOF"""


def test_iflow_agent_solves_a_task_through_rock(provider, tmp_path, monkeypatch) -> None:
    """iFlow's real loop and ROCK executor; only the model's choices are scripted (a test double)."""
    from iflow.testing import ScriptedOpenAIServer, call, say

    monkeypatch.setenv("IFLOW_HOME", str(tmp_path / "iflow-home"))
    suite = load_tasks(DEFAULT_TASKS, ["nim-winning-moves"])
    replies = [
        call("run_shell_command", command="head -3 positions.txt && pwd"),
        call("run_shell_command", command=NIM_SOLUTION),
        say("Wrote /app/moves.txt."),
        say("I could not find the file."),  # the second attempt gives up at once
    ]
    with ScriptedOpenAIServer(replies) as llm:
        trials = run_trials(suite.tasks, "iflow", tmp_path / "out", 2, 1, model=llm.url, provider=provider)
        prompts = [r["messages"][-1]["content"] for r in llm.requests if r["messages"][-1]["role"] == "user"]
    solved, gave_up = trials
    assert solved.reward == 1.0 and solved.passed and solved.model == llm.url
    assert [c.command.split(":")[0] for c in solved.commands[:2]] == ["run_shell_command"] * 2
    assert re.search(r"^/app$", solved.agent_log, re.M)  # pwd printed the image's WORKDIR
    assert gave_up.reward == 0.0 and not gave_up.passed and gave_up.failure_mode is None
    assert any("/app/positions.txt" in p for p in prompts if isinstance(p, str))
