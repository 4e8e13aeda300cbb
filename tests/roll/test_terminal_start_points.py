"""The start-point scheduler of `roll train`'s terminal env (hand-computed cases on real suite tasks): groups
share one start and expert snapshot and cycle over the parallel anchors, successes move the rollback start
and refresh the expert book under the run folder, the rollback state survives a checkpoint, and the
evaluation's episodes come in a fixed order with stable keys."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rock.proxy.types import EpisodeRecord, RecordedChunk
from roll.rollout.terminal.config import TerminalEnvConfig
from roll.rollout.terminal.evaluation import eval_fields, eval_tasks
from roll.rollout.terminal.resampling.expert import (
    FINAL_MESSAGE,
    ExpertStep,
    RecordedExpertsError,
    recorded_experts,
)
from roll.rollout.terminal.resampling.expert_store import ORACLE
from roll.rollout.terminal.resampling.start_points import StartPoints, anchor_offset
from roll.types import Chunk, Trajectory

SUITE = Path(__file__).resolve().parents[2] / "rome" / "tasks" / "terminal-pro"
TASK = "fix-permissions"  # five oracle steps: four commands, then the final message


def env(**resampling: Any) -> TerminalEnvConfig:
    rollback = {"threshold": 0.5, "min_samples": 2, **resampling.pop("rollback", {})}
    return TerminalEnvConfig.model_validate(
        {
            "tasks_dir": str(SUITE),
            "task_ids": [TASK],
            "resampling": {"anchors": 2, "rollback": rollback, **resampling},
        }
    )


def success(episode_id: str, *commands: str) -> EpisodeRecord:
    """A successful episode as the proxy records it: each command worked (exit code 0), then a final word."""
    chunk = Chunk(context_ids=[1], output_ids=[2], output_logprobs=[0.0])
    chunks, pending = [], []
    for index, command in enumerate([*commands, None]):
        if command is None:
            answer: dict[str, Any] = {"role": "assistant", "content": FINAL_MESSAGE}
        else:
            arguments = json.dumps({"command": command})
            call = {
                "id": f"c{index}",
                "type": "function",
                "function": {"name": "run_shell_command", "arguments": arguments},
            }
            answer = {"role": "assistant", "content": "", "tool_calls": [call]}
        chunks.append(RecordedChunk(chunk=chunk, messages=pending, answer=answer, latency_s=0.0))
        if command is not None:
            pending = [{"role": "tool", "tool_call_id": f"c{index}", "content": "Output:\n\nExit code: 0"}]
    return EpisodeRecord(episode_id=episode_id, chunks=chunks)


def test_groups_share_their_start_and_cycle_over_the_anchors(tmp_path: Path) -> None:
    points = StartPoints(env(), tmp_path / "experts", None)
    oracle = points.experts()[TASK]
    assert len(oracle) == 5
    assert anchor_offset(TASK) % 2 == 1  # so its first group starts at the second anchor
    assert points.group_start("g0", TASK) == (3, oracle)  # the anchor before the current start
    assert points.group_start("g1", TASK) == (4, oracle)  # the current start: the last expert step
    assert points.group_start("g2", TASK) == (3, oracle)
    assert points.group_start("g0", TASK) == (3, oracle)  # every member of g0 gets the same
    assert points.group_start("g3", TASK) == (4, oracle)
    # Two successes at start 4 (min_samples 2, threshold 0.5) move the rollback start back to 3.
    points.report("g1", True, None, 0)
    assert points.metrics()[f"start/{TASK}"] == 4
    points.report("g3", True, None, 0)
    assert points.metrics()[f"start/{TASK}"] == 3
    assert points.group_start("g4", TASK)[0] == 2  # the fifth group: anchors 3 and 2, second one
    disabled = StartPoints(env(enabled=False), tmp_path / "other", None)
    assert [disabled.group_start(f"g{i}", TASK)[0] for i in range(3)] == [0, 0, 0]


def test_a_success_refreshes_the_expert_for_later_groups_only(tmp_path: Path) -> None:
    points = StartPoints(env(), tmp_path / "experts", None)
    oracle = points.experts()[TASK]
    assert points.group_start("g2", TASK)[0] == 3  # the oracle's first three steps, then the policy
    start, base = points.group_start("g1", TASK)
    assert start == 4 and points.group_start("g2", TASK)[0] == 3
    # g2's member solved it with one command of its own after the oracle's first three: as long as the
    # oracle, but more of it the policy's own, so it becomes the expert.
    assert points.report("g2", True, success("ep-own", "chmod 640 /srv/app/config.ini"), version=7)
    expert = points.experts()[TASK]
    assert expert[:3] == oracle[:3] and expert[3] == ExpertStep("chmod 640 /srv/app/config.ini")
    saved = json.loads((tmp_path / "experts" / f"{TASK}.json").read_text())
    assert saved["origins"] == [ORACLE] * 3 + ["ep-own"] * 2
    assert saved["refreshes"][0] == {
        "round": 7,
        "episode_id": "ep-own",
        "start": 3,
        "steps": 5,
        "previous_steps": 5,
        "policy_steps": 2,
    }
    # A group that started before the refresh keeps its snapshot; the next one starts on the new expert.
    assert points.group_start("g1", TASK) == (4, base)
    assert points.group_start("g4", TASK)[1] == expert
    # The same again is no better; a failure is never offered.
    assert not points.report("g2", True, success("ep-again", "chmod 640 /srv/app/config.ini"), version=8)
    assert not points.report("g2", False, None, version=8)
    assert json.loads((tmp_path / "experts" / f"{TASK}.json").read_text())["refreshes"] == saved["refreshes"]


def test_resume_restores_the_book_and_the_rollback_state_and_a_fresh_run_forgets_them(tmp_path: Path) -> None:
    folder = tmp_path / "experts"
    points = StartPoints(env(rollback={"min_samples": 1}), folder, None)
    assert points.group_start("g-first", TASK)[0] == 3
    assert points.group_start("g0", TASK)[0] == 4
    points.report("g0", True, None, 0)  # start 4 learned: the start moves to 3
    assert points.group_start("g1", TASK)[0] == 2  # anchors 3 and 2: the third group takes 2
    # From start 2 it solved the task in two steps of its own: 4 steps in all, shorter than the oracle's 5.
    assert points.report("g1", True, success("ep-1", "chmod 640 /srv/app/config.ini"), 1)
    state = json.loads(json.dumps(points.state()))  # as a checkpoint holds it
    assert state[TASK] == {"num_chunks": 4, "current": 3, "outcomes": {"2": [True]}}

    resumed = StartPoints(env(rollback={"min_samples": 1}), folder, state)
    assert resumed.experts() == points.experts()
    assert resumed.state() == state
    assert resumed.describe() == [
        f"{TASK}: starts from its saved expert {folder / f'{TASK}.json'} (4 steps, 2 the policy's own)"
    ]

    fresh = StartPoints(env(rollback={"min_samples": 1}), folder, None)
    assert not folder.exists() and fresh.metrics()[f"start/{TASK}"] == 4
    assert fresh.book.current(TASK).native == 0


def test_evaluation_plays_every_start_of_every_task_in_order_with_stable_keys() -> None:
    tasks = eval_tasks({"a": 2, "b": 3}, episodes=1)
    assert [(t.seed, t.start, t.index) for t in tasks] == [
        (0, 0, 0),
        (0, 1, 0),
        (1, 0, 0),
        (1, 1, 0),
        (1, 2, 0),
    ]
    assert len({t.group_id for t in tasks}) == 5
    assert [(t.seed, t.start, t.index) for t in eval_tasks({"a": 1}, episodes=2)] == [(0, 0, 0), (0, 0, 1)]

    def played(task: str, start: int, won: bool, index: int = 0) -> Trajectory:
        chunk = Chunk(context_ids=[1], output_ids=[2])
        metadata = {"task": task, "start": start, "success": won, "index": index}
        return Trajectory(chunks=[chunk], reward=float(won), metadata=metadata)

    # Finished in any order, the record is the same.
    episodes = [
        played("b", 2, True),
        played("a", 0, False),
        played("b", 0, False),
        played("a", 1, True),
        played("b", 1, True),
    ]
    fields = eval_fields(episodes, episodes=1, fork_gap=0.5)
    assert fields == eval_fields(list(reversed(episodes)), episodes=1, fork_gap=0.5)
    assert fields["won_seeds"] == ["a@1", "b@1", "b@2"]
    assert fields["seed_rewards"] == {"b@2": 1.0, "a@0": 0.0, "b@0": 0.0, "a@1": 1.0, "b@1": 1.0}
    assert fields["by_start"] == {"b": {"0": 0.0, "1": 1.0, "2": 1.0}, "a": {"0": 0.0, "1": 1.0}}
    assert fields["crucial_fork"] == {"a": 0, "b": 0}
    twice = eval_fields([played("a", 0, True, 0), played("a", 0, False, 1)], episodes=2, fork_gap=0.5)
    assert twice["won_seeds"] == ["a@0#0"] and twice["by_start"] == {"a": {"0": 0.5}}


def test_a_bad_start_is_refused(tmp_path: Path) -> None:
    from roll.rollout.terminal.episode import play_episode

    points = StartPoints(env(), tmp_path / "experts", None)
    with pytest.raises(ValueError, match=r"start 6 is outside 0\.\.5"):
        play_episode(None, None, None, env().agent, points.experts()[TASK], 6)  # type: ignore[arg-type]


def trajectory_record(task_id: str, passed: bool, *turns: tuple[str, str | None, bool]) -> str:
    """A rome trajectory record (one JSONL line): each turn is (text, shell command or None, marked error)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "the task"}]
    for index, (text, command, error) in enumerate(turns):
        message: dict[str, Any] = {"role": "assistant", "content": text, "error": error}
        if command is not None:
            arguments = json.dumps({"command": command})
            message["tool_calls"] = [
                {
                    "id": f"c{index}",
                    "type": "function",
                    "function": {"name": "run_shell_command", "arguments": arguments},
                }
            ]
        messages.append(message)
        if command is not None:
            messages.append(
                {"role": "tool", "tool_call_id": f"c{index}", "content": "Output:\n\nExit code: 0"}
            )
    return json.dumps({"task_id": task_id, "messages": messages, "verifier": {"passed": passed}})


def test_recorded_experts_take_each_tasks_shortest_clean_success(tmp_path: Path) -> None:
    done = ("Done.", None, False)
    path = tmp_path / "kept.jsonl"
    lines = [
        trajectory_record(TASK, True, ("Look.", "ls", False), ("Fix it.", "chmod +x run.sh", False), done),
        trajectory_record(TASK, False, ("Fix it.", "chmod 777 run.sh", False), done),  # its tests failed
        trajectory_record(
            TASK, True, ("Oops.", "chmod +x nope.sh", True), ("Fix it.", "chmod +x run.sh", False), done
        ),
        trajectory_record(TASK, True, ("Fix it.", "chmod +x run.sh", False), done),
        trajectory_record("other", True, ("Count.", "wc -l a", False), done),
    ]
    path.write_text("\n".join(lines) + "\n\n")
    experts = recorded_experts(path)
    assert experts == {
        TASK: [ExpertStep("chmod +x run.sh", "Fix it."), ExpertStep(None, "Done.")],
        "other": [ExpertStep("wc -l a", "Count."), ExpertStep(None, "Done.")],
    }
    # The run starts TASK from it (2 steps, where its oracle has 5): anchors 2 cycle over starts 0 and 1 (the
    # task's offset is 1).
    config = env().model_copy(update={"experts": path})
    points = StartPoints(config, tmp_path / "experts", None)
    assert points.experts()[TASK] == experts[TASK]
    assert [points.group_start(f"g{i}", TASK)[0] for i in range(2)] == [0, 1]
    assert points.describe() == [  # a fresh run: no saved expert to report on
        "initialized resampling: 1 of 1 train tasks start from their shortest successful trajectory in "
        f"{path}, the others from their oracle solution"
    ]
    from_scratch = config.model_copy(
        update={"resampling": config.resampling.model_copy(update={"enabled": False})}
    )
    assert StartPoints(from_scratch, tmp_path / "scratch", None).describe() == [
        "imitation fallback (every episode starts from scratch): 1 of 1 train tasks imitate their shortest "
        f"successful trajectory in {path}, the others their oracle solution"
    ]
    # GRPO's setting (no expert prefix, no imitation): no expert is used, so none is announced.
    no_experts = from_scratch.model_copy(
        update={"resampling": from_scratch.resampling.model_copy(update={"imitation": False})}
    )
    assert StartPoints(no_experts, tmp_path / "none", None).describe() == []
    assert points.book.load_saved()[TASK].describe() == (
        f"{TASK}: starts from the recorded ({path}) expert (2 steps); no saved expert at "
        f"{tmp_path / 'experts' / (TASK + '.json')}"
    )


def test_an_expert_is_judged_by_its_tool_results_not_only_by_error_marks(tmp_path: Path) -> None:
    # As iflow records it: no `error` mark anywhere, but the first call's shell result says it failed.
    mistaken = json.loads(
        trajectory_record(TASK, True, ("Mean.", "python3 -c 'import numpy'", False), ("Done.", None, False))
    )
    mistaken["messages"][2]["content"] = "ModuleNotFoundError: No module named 'numpy'\n\nExit code: 1"
    clean = trajectory_record("other", True, ("Count.", "wc -l a", False), ("Done.", None, False))
    unanswered = json.loads(trajectory_record("third", True, ("Look.", "ls", False), ("Done.", None, False)))
    unanswered["messages"] = [m for m in unanswered["messages"] if m["role"] != "tool"]
    path = tmp_path / "kept.jsonl"
    path.write_text("\n".join([json.dumps(mistaken), clean, json.dumps(unanswered)]) + "\n")
    assert recorded_experts(path) == {"other": [ExpertStep("wc -l a", "Count."), ExpertStep(None, "Done.")]}


def test_a_broken_experts_file_says_which_line(tmp_path: Path) -> None:
    path = tmp_path / "kept.jsonl"
    path.write_text(trajectory_record(TASK, True, ("Done.", None, False)) + '\n{"task_id": "x"}\n')
    with pytest.raises(RecordedExpertsError, match=r"line 2 is not a trajectory record"):
        recorded_experts(path)
    path.write_text('{"task_id": "x", "messages": ["not a message"], "verifier": {"passed": true}}\n')
    with pytest.raises(RecordedExpertsError, match=r"line 1 is not a trajectory record"):
        recorded_experts(path)
    with pytest.raises(RecordedExpertsError, match=r"cannot be read"):
        recorded_experts(tmp_path / "missing.jsonl")
