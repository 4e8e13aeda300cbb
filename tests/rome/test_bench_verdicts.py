"""Verdict classes from what a trial recorded: infra failures never count as task failures (no Docker)."""

import pytest

from rome.bench.scoring import summarize
from rome.bench.trial import TrialResult, classify
from rome.bench.validate import ValidationRow
from rome.bench.verdict import network_failure, verifier_crash


def trial(**fields) -> TrialResult:
    base = {
        "task_id": "t",
        "attempt": 0,
        "agent": "oracle",
        "category": "c",
        "difficulty": "d",
        "instruction": "i",
    }
    return TrialResult(**(base | fields))


@pytest.mark.parametrize(
    ("fields", "verdict", "cause"),
    [
        ({"reward": 1.0}, "passed", None),
        ({"reward": 0.0, "verifier_output": "FAILED t.py::x - assert 1 == 2"}, "failed", None),
        ({"failure_mode": "test_timeout"}, "failed", "timeout"),
        ({"failure_mode": "agent_timeout"}, "agent_error", "timeout"),
        ({"failure_mode": "agent_error", "agent_log": "Traceback: KeyError"}, "agent_error", "agent crashed"),
        (
            {"failure_mode": "build_error", "error": "step 3 failed: exit 100"},
            "infra_error",
            "image build failed",
        ),
        (
            {"failure_mode": "build_error", "error": "Temporary failure resolving 'deb.debian.org'"},
            "infra_error",
            "network needed",
        ),
        ({"failure_mode": "sandbox_error", "error": "gone"}, "infra_error", "sandbox lost"),
        (
            {"failure_mode": "verifier_error", "error": "reward.txt holds 'x'"},
            "infra_error",
            "verifier crashed",
        ),
        (
            {"failure_mode": "agent_error", "agent_log": "curl: (6) Could not resolve host: example.invalid"},
            "infra_error",
            "network needed",
        ),
        (
            {"verifier_output": "WARNING: Retrying ... [Errno -3] Temporary failure in name resolution"},
            "infra_error",
            "network needed",
        ),
        # A test of a server the agent should have started: a refused loopback connection is a task failure.
        (
            {"verifier_output": "curl: (7) Failed to connect to localhost port 8080: Connection refused"},
            "failed",
            None,
        ),
        # The grader passing despite an agent error still passes (the work was done).
        ({"failure_mode": "agent_timeout", "reward": 1.0}, "passed", None),
    ],
)
def test_verdict_and_cause(fields, verdict, cause) -> None:
    result = trial(**fields)
    classify(result)
    assert (result.verdict, result.cause) == (verdict, cause)
    if cause == "network needed":
        assert "no network here" in (result.error or "")


def test_crash_and_network_lines_are_quoted() -> None:
    assert network_failure("ok\nerror: dns error: failed to lookup address information\nmore") == (
        "error: dns error: failed to lookup address information"
    )
    assert network_failure("all fine") is None
    assert verifier_crash("/tests/test.sh: line 2: pytest: command not found", 127) == (
        "/tests/test.sh: line 2: pytest: command not found"
    )
    assert "status 127" in (verifier_crash("", 127) or "")
    assert verifier_crash("1 failed", 1) is None


def test_infra_errors_are_left_out_of_the_scores() -> None:
    rows = [
        {"task_id": "a", "category": "x", "difficulty": "e", "reward": 1.0, "verdict": "passed"},
        {
            "task_id": "a",
            "category": "x",
            "difficulty": "e",
            "reward": 0.0,
            "verdict": "infra_error",
            "cause": "network needed",
        },
        {
            "task_id": "b",
            "category": "x",
            "difficulty": "e",
            "reward": 0.0,
            "verdict": "infra_error",
            "cause": "image build failed",
        },
        {"task_id": "c", "category": "x", "difficulty": "e", "reward": 0.0, "verdict": "failed"},
    ]
    s = summarize(rows)
    # a: 1 judged trial, passed; b: not judged at all; c: failed. Two tasks scored, pass@1 = 0.5.
    assert (s.overall.tasks, s.overall.trials, s.overall.pass_at_1) == (2, 2, 0.5)
    assert s.infra_errors == {"image build failed": 1, "network needed": 1}
    assert s.unjudged_tasks == ["b"]
    assert s.verdicts == {"failed": 1, "infra_error": 2, "passed": 1}


def test_validation_separates_cannot_run_from_broken() -> None:
    common = {"task_id": "t", "category": "c", "difficulty": "d", "oracle_error": None, "nop_error": None}
    offline = ValidationRow(
        **common, oracle_reward=0.0, nop_reward=0.0, cannot_run="oracle: network needed: x"
    )
    assert not offline.ok and not offline.broken
    assert offline.problem == "cannot run here, because oracle: network needed: x"
    broken = ValidationRow(**common, oracle_reward=1.0, nop_reward=1.0)
    assert broken.broken and broken.problem.startswith("task broken: nop passes")
    assert ValidationRow(**common, oracle_reward=1.0, nop_reward=0.0).ok
