"""The shipped terminal-pro suite: shape checks that need no Docker, and reward parsing."""

import re
from collections import Counter

import pytest

from rome.bench.cli import DEFAULT_TASKS
from rome.terminal_tasks.task import load_tasks
from rome.terminal_tasks.verifier import parse_reward_file, pytest_reward

DOMAINS = {
    "data-processing",
    "games",
    "debugging",
    "system-administration",
    "scientific-computing",
    "software-engineering",
    "machine-learning",
    "security",
}


@pytest.fixture(scope="module")
def suite():
    return load_tasks(DEFAULT_TASKS)


def test_suite_loads_cleanly_with_every_domain(suite) -> None:
    assert suite.errors == []
    assert len(suite.tasks) >= 32
    per_domain = Counter(t.category for t in suite.tasks)
    assert set(per_domain) == DOMAINS
    assert min(per_domain.values()) >= 4
    assert set(Counter(t.difficulty for t in suite.tasks)) == {"easy", "medium", "hard"}


def test_tasks_build_offline_from_local_bases(suite) -> None:
    for task in suite.tasks:
        dockerfile = task.dockerfile.read_text()
        assert re.findall(r"^FROM (\S+)", dockerfile, re.M) in (["python:3.11-slim"], ["debian:bookworm"]), (
            task.id
        )
        assert "pip install" not in dockerfile, task.id
        assert task.solution_command is not None, task.id
        assert not task.allow_internet, task.id


def test_tests_are_not_in_the_image(suite) -> None:
    for task in suite.tasks:
        assert "tests" not in task.dockerfile.read_text(), task.id


@pytest.mark.parametrize(
    ("text", "reward"), [("1\n", 1.0), ("0", 0.0), ("0.25 extra", 0.25), ('{"reward": 0.5}', 0.5)]
)
def test_reward_file_formats(text, reward) -> None:
    assert parse_reward_file(text) == reward


def test_reward_file_garbage_raises() -> None:
    with pytest.raises(ValueError):
        parse_reward_file("passed")


def test_pytest_reward_reads_the_summary_before_the_exit_status() -> None:
    assert pytest_reward("PASSED t.py::a\nPASSED t.py::b\n", 1) == (1.0, "pytest-summary")
    assert pytest_reward("PASSED t.py::a\nFAILED t.py::b - assert\n", 0) == (0.0, "pytest-summary")
    assert pytest_reward("ERROR t.py - ImportError\n", 0) == (0.0, "pytest-summary")
    assert pytest_reward("bash: pytest: command not found\n", 127) == (0.0, "exit-code")
    assert pytest_reward("all good\n", 0) == (1.0, "exit-code")


def test_tests_regenerate_the_inputs_from_the_same_generator(suite) -> None:
    """tests/gen_truth.* must equal the environment's generator, or the inputs check would flag the oracle."""
    for task in suite.tasks:
        for gen in task.build_context.glob("gen.*"):
            truth = task.tests_dir / f"gen_truth{gen.suffix}"
            if task.id != "fix-permissions":  # its inputs are the state the agent must change
                assert truth.is_file() and truth.read_bytes() == gen.read_bytes(), task.id
