"""Evaluation on held-out terminal tasks (env.eval_task_ids): never trained on, played from scratch, compared
task by task between evaluations."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from pydantic import ValidationError
from rich.console import Console

from roll.config import validate_config
from roll.pipeline.config import TrainConfig
from roll.rollout.terminal.config import TerminalEnvConfig
from roll.rollout.terminal.evaluation import held_out_sets, held_out_tasks
from roll.types import Chunk, Trajectory

TRAIN = ["find-large-files"]
HELD_OUT = ["trapezoid-integral", "fix-permissions"]


def test_held_out_tasks_must_not_be_trained_on() -> None:
    with pytest.raises(ValidationError, match=r"held out from env\.task_ids, but both name fix-permissions"):
        TerminalEnvConfig(task_ids=["fix-permissions", "semver-sort"], eval_task_ids=["fix-permissions"])
    assert TerminalEnvConfig(task_ids=TRAIN).eval_task_ids == []


def test_every_held_out_task_is_played_from_scratch_episodes_times() -> None:
    tasks = held_out_tasks(HELD_OUT, episodes=2)
    assert [(t.group_id, t.seed, t.index, t.start) for t in tasks] == [
        ("eval-trapezoid-integral", 0, 0, 0),
        ("eval-trapezoid-integral", 0, 1, 0),
        ("eval-fix-permissions", 1, 0, 0),
        ("eval-fix-permissions", 1, 1, 0),
    ]


def test_held_out_results_split_into_the_in_family_and_out_of_family_sets() -> None:
    tasks = held_out_tasks(["a", "b", "x"], episodes=1)
    chunk = Chunk(context_ids=[1], output_ids=[2], weight_version=0)
    played = [Trajectory(chunks=[chunk], reward=float(i), metadata={"task": t}) for i, t in enumerate("abx")]
    sets = held_out_sets(tasks, [played[0], None, played[2]], {"x"})
    assert sets == {"in_family": ([played[0]], 1), "out_of_family": ([played[2]], 0)}
    assert held_out_sets(tasks[:2], played[:2], set()) == {"in_family": (played[:2], 0)}


@pytest.mark.docker
@pytest.mark.slow
def test_a_run_evaluates_the_held_out_tasks_and_compares_them_task_by_task(
    ray_session: None, tmp_path: Path
) -> None:
    from roll.pipeline.controller import train

    run_dir = tmp_path / "run"
    config = {
        "name": "held-out",
        "output_dir": str(run_dir),
        "steps": 1,
        "async_ratio": 0,
        "trainer": {"model": "builtin:tiny-qwen3-moe", "micro_batch_tokens": 4096, "optimizer": {"lr": 1e-3}},
        "engines": {"engine": {"type": "scripted"}},  # follows each task's oracle
        "env": {
            "type": "terminal",
            "task_ids": TRAIN,
            "eval_task_ids": HELD_OUT[:1],
            "out_of_family_task_ids": HELD_OUT[1:],  # reported apart
            "agent": {"max_turns": 4, "timeout_s": 120, "prompt_profile": "compact"},
            "rock": {"slots": 2},
        },
        "rollout": {"num_workers": 1, "episodes_in_flight": 2, "group_size": 2, "groups_per_step": 1},
        "resources": {"trainer_cpus": 0.25, "engine_cpus": 0.25, "trainer_threads": 1, "engine_threads": 1},
        "eval": {"episodes": 1, "sampling": {"temperature": 0.0, "max_new_tokens": 256}},
    }
    out = io.StringIO()
    train(validate_config(TrainConfig, config), Console(file=out, width=200))
    evals = [json.loads(line) for line in (run_dir / "eval.jsonl").read_text().splitlines()]
    assert [(e["label"], e["episodes"], e["failed"]) for e in evals] == [
        ("before RL", 1, 0),
        ("after RL", 1, 0),
    ]
    for record in evals:  # only the held-out tasks, each from k = 0, the two sets apart
        assert record["won_seeds"] == ["trapezoid-integral@0"]
        assert record["out_of_family"]["won_seeds"] == ["fix-permissions@0"]
        assert (record["out_of_family"]["episodes"], record["out_of_family"]["success"]) == (1, 1.0)
    printed = out.getvalue()
    assert (
        "1 held-out terminal tasks (new instances of the trained families) and 1 out-of-family tasks "
        "(families never trained on), 1 episode(s) each from scratch" in printed
    )
    assert "out of family 100% (1/1)" in printed
    assert (
        "after RL vs before RL, seed by seed: won 0 that it had lost, lost 0 that it had won (both won 1)"
        in printed
    )
    assert "after RL (out of family) vs before RL (out of family), seed by seed" in printed
    assert "Eval success by task and start point k" not in printed
