"""The expert book: a task's expert refreshed from the policy's own successful episodes (pure bookkeeping
over recorded episodes; the whole loop with sandboxes is in test_terminal_pipeline.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rock.proxy.types import EpisodeRecord, RecordedChunk
from roll.rollout.terminal.resampling.expert import FINAL_MESSAGE, ExpertStep
from roll.rollout.terminal.resampling.expert_book import ORACLE, ExpertBook, policy_steps
from roll.rollout.terminal.resampling.rollback import SequentialRollback
from roll.types import Chunk

ORACLE_STEPS = [ExpertStep("mkdir out"), ExpertStep("make > out/log"), ExpertStep(None, "Built.")]


def shell(
    command: str, content: str = "", name: str = "run_shell_command", exit_code: int | None = 0
) -> dict[str, Any]:
    """An answer with one shell call; the next call of the episode carries its result (exit_code None:
    no result was recorded, as when the episode ends on the call)."""
    call = {
        "id": f"call-{command}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps({"command": command})},
    }
    return {"role": "assistant", "content": content, "tool_calls": [call], "exit_code": exit_code}


def say(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def record(episode_id: str, *answers: dict[str, Any]) -> EpisodeRecord:
    """The episode as the proxy records it: each call's messages end with the previous call's tool results."""
    chunk = Chunk(context_ids=[1], output_ids=[2], output_logprobs=[0.0])
    chunks, pending = [], []
    for answer in answers:
        exit_code = answer.pop("exit_code", None)
        chunks.append(RecordedChunk(chunk=chunk, messages=pending, answer=answer, latency_s=0.0))
        pending = [
            {
                "role": "tool",
                "tool_call_id": call["id"],
                "content": f"Output:\n(no output)\nExit code: {exit_code}",
            }
            for call in answer.get("tool_calls", [])
            if exit_code is not None
        ]
    return EpisodeRecord(episode_id=episode_id, chunks=chunks)


def test_policy_steps_are_its_shell_calls_and_final_answer():
    steps = policy_steps(record("e", shell("ls", content="Looking."), say("Done here.")))
    assert steps == [ExpertStep("ls", "Looking."), ExpertStep(None, "Done here.")]
    assert policy_steps(record("e", say(""))) == [ExpertStep(None, FINAL_MESSAGE)]


def test_calls_that_cannot_be_replayed_give_no_steps():
    assert policy_steps(record("e", shell("cat x", name="read_file"), say("ok"))) is None
    broken = say("")
    broken["tool_calls"] = [{"id": "c", "function": {"name": "run_shell_command", "arguments": "{not json"}}]
    assert policy_steps(record("e", broken)) is None
    assert policy_steps(record("e", shell("   "))) is None


def test_a_step_that_did_not_work_gives_no_steps():
    # The replayed prefix may have done the work while the policy's own command failed: not expert material.
    assert policy_steps(record("e", shell("cat <tool_response>", exit_code=2), say("ok"))) is None
    failed = record("e", shell("make"), say("ok"))
    failed.chunks[1].messages[0]["content"] = "Error: the command did not finish within 30 s and was killed"
    assert policy_steps(failed) is None
    assert policy_steps(record("e", shell("ls", exit_code=None))) is None  # its result was never seen
    assert policy_steps(record("e", shell("ls", exit_code=0), say("ok"))) == [
        ExpertStep("ls"),
        ExpertStep(None, "ok"),
    ]


def test_a_success_becomes_the_expert_when_shorter_or_more_the_policys_own(tmp_path: Path):
    book = ExpertBook({"t": ORACLE_STEPS}, tmp_path / "experts", {"t": "f1"})
    oracle = book.current("t")
    assert oracle.native == 0 and not (tmp_path / "experts").exists()

    # From start 2 (both commands replayed) the policy ends in its own words: as long, one step its own.
    assert book.offer("t", oracle, 2, record("e1", say("All built.")), round_index=0)
    first = book.current("t")
    assert first.steps == [*ORACLE_STEPS[:2], ExpertStep(None, "All built.")]
    assert first.origins == [ORACLE, ORACLE, "e1"]
    # The same again is no better; a longer path is worse, even if more of it is the policy's.
    assert not book.offer("t", first, 2, record("e2", say("Built again.")), round_index=0)
    longer = record("e3", shell("mkdir -p out"), shell("make > out/log"), shell("true"), say("ok"))
    assert not book.offer("t", first, 0, longer, round_index=0)
    # A success from scratch in two steps is shorter.
    assert book.offer("t", oracle, 0, record("e4", shell("mkdir out && make > out/log"), say("ok")), 1)
    second = book.current("t")
    assert second.steps == [ExpertStep("mkdir out && make > out/log"), ExpertStep(None, "ok")]
    assert second.origins == ["e4", "e4"] and second.native == 2
    assert first.steps[2] == ExpertStep(None, "All built.")  # snapshots are never changed in place

    saved = json.loads((tmp_path / "experts" / "t.json").read_text())
    assert saved == {
        "task_fingerprint": "f1",
        "steps": [
            {"command": "mkdir out && make > out/log", "content": ""},
            {"command": None, "content": "ok"},
        ],
        "origins": ["e4", "e4"],
        "refreshes": [
            {"round": 0, "episode_id": "e1", "start": 2, "steps": 3, "previous_steps": 3, "policy_steps": 1},
            {"round": 1, "episode_id": "e4", "start": 0, "steps": 2, "previous_steps": 3, "policy_steps": 2},
        ],
    }
    assert book.summary() == {"t": {"steps": 2, "policy_steps": 2, "refreshes": saved["refreshes"]}}


def test_an_unreplayable_success_leaves_the_expert_alone():
    book = ExpertBook({"t": ORACLE_STEPS})
    assert not book.offer("t", book.current("t"), 0, record("e", shell("x", name="write_file")), 0)
    assert book.current("t").steps == ORACLE_STEPS


def test_rebase_keeps_the_counts_of_the_shared_prefix():
    schedule = SequentialRollback(4, threshold=0.5, min_samples=1)
    schedule.record(3, True)  # learned: back to 2
    schedule.record(2, False)
    schedule.record(1, True)
    assert schedule.current == 2
    schedule.rebase(3, shared=1)  # a 3-step expert whose first step is the old one's
    assert schedule.num_chunks == 3 and schedule.current == 2
    assert schedule.rates() == {1: 1.0}
    schedule.rebase(1, shared=0)
    assert schedule.current == 0 and schedule.rates() == {}
    with pytest.raises(ValueError, match="rebase"):
        schedule.rebase(2, shared=3)
