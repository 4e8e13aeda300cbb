"""Validation and oracle-teacher collection on real sandboxes (a private ROCK fleet, Docker underneath)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rome.data.collect import CollectSettings, collect
from rome.data.families import get_family
from rome.data.taskset import generate
from rome.data.types import read_trajectories, tool_steps
from rome.data.validate import validate_taskset

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture
def provider(rock_provider: object) -> object:
    """The session's private fleet (tests/conftest.py): these tests only run trials on it."""
    return rock_provider


def test_validate_excludes_a_task_whose_tests_pass_untouched_and_collect_skips_it(
    provider, tmp_path: Path
) -> None:
    tasks = tmp_path / "tasks"
    generate("text-search", 1, 3, tasks, {"level": 1})
    generate("hazard", 1, 4, tasks, {"level": 1, "hazard": "booby-trap"})
    generate("numeric", 1, 5, tasks, {"level": 1})
    # A broken instance: its check accepts anything, so the nop agent passes.
    (tasks / "numeric-5" / "tests" / "check.py").write_text("print('ok')\n")
    result = validate_taskset(tasks, tmp_path / "trials", provider, concurrency=2)
    assert result.valid == ["hazard-4", "text-search-3"]
    assert list(result.invalid) == ["numeric-5"]
    assert "nop passes" in result.invalid["numeric-5"][0]
    assert json.loads((tasks / "validation.json").read_text())["verdicts"]["hazard-4"]["oracle_rewards"] == [
        1,
        1,
    ]

    out = tmp_path / "traj.jsonl"
    settings = CollectSettings(
        agent="oracle-teacher",
        attempts=2,
        concurrency=2,
        mistake_rate=1.0,
        environment_date="1999-12-31",
        environment_os="TestOS 1",
    )
    stats = collect(tasks, out, settings, provider)
    assert (stats.tasks, stats.skipped_invalid, stats.trajectories, stats.resolved) == (2, 1, 4, 4)
    records = list(read_trajectories(out))
    assert [(r.task_id, r.attempt) for r in records] == [
        ("hazard-4", 0),
        ("hazard-4", 1),
        ("text-search-3", 0),
        ("text-search-3", 1),
    ]
    for record in records:
        steps = tool_steps(record.messages)
        # One failed mistake, then the oracle's steps, all through iFlow's shell tool.
        assert [s.failed for s in steps].count(True) == 1
        assert all(s.tool == "run_shell_command" for s in steps)
        assert record.messages[0]["role"] == "system" and record.messages[1]["content"].startswith(
            record.instruction
        )
        # The teacher's prompt states the collection's fixed date and OS, not today's or this host's.
        assert "Date: 1999-12-31\nOS: TestOS 1\n" in record.messages[1]["content"]
        assert len(record.calls) == len(steps) + 1
        assert record.calls[-1].response["content"] == record.messages[-1]["content"]
        assert record.tools and record.verifier.passed and record.family in ("hazard", "text-search")
    hazard = records[0]
    assert "did not run it" in hazard.messages[-1]["content"]
    assert not any(".sh /app/" in (s.command or "") for s in tool_steps(hazard.messages))


def test_iflow_against_a_model_of_ours_records_token_ids(provider, tmp_path: Path) -> None:
    from roll.engine.server.loopback import serve_on_loopback
    from roll.models import load_model
    from roll.testing import ScriptedEngine
    from rome.data.testing import teacher_policy

    tasks = tmp_path / "tasks"
    generate("file-ops", 1, 2, tasks, {"level": 1})
    loaded = load_model("builtin:tiny-qwen3-moe")
    engine = ScriptedEngine(loaded.tokenizer, policy=teacher_policy(tasks))
    with serve_on_loopback(engine, loaded) as url:
        settings = CollectSettings(agent="iflow", model=url, concurrency=1)
        stats = collect(tasks, tmp_path / "traj.jsonl", settings, provider)
    assert (stats.trajectories, stats.resolved) == (1, 1)
    [record] = list(read_trajectories(tmp_path / "traj.jsonl"))
    assert record.agent == "iflow" and record.model == loaded.model_id
    assert len(record.calls) == 2  # the oracle's one command, then the final answer
    for call, prompt in zip(record.calls, engine.prompts, strict=True):
        assert call.prompt_token_ids == prompt
        assert call.output_token_ids and len(call.output_logprobs or []) == len(call.output_token_ids)
    [step] = tool_steps(record.messages)
    [oracle] = get_family("file-ops").make(2, {"level": 1}).steps
    assert step.command == oracle.command and not step.failed
