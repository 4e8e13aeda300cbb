"""`roll train` on terminal tasks: iflow agents in real ROCK sandboxes of a private fleet, their model calls
through the train-mode proxy to the pipeline's engine actors, the tasks' tests as reward. The engine is the
scripted test double of the model's choices (it follows each task's oracle, or errs at once); the trainer
trains the real tiny model on the recorded tokens.

A 2-step run (initialized resampling, imitation fallback, eval by task and start point, the summary), its
resumption with the saved expert book, and a rollout worker killed mid-episode."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from roll.config import validate_config
from roll.pipeline.config import TrainConfig
from roll.rollout.terminal.resampling.start_points import anchor_offset

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TASKS = ["find-large-files", "trapezoid-integral"]  # two oracle steps each: a command, then a final message


def terminal_config(run_dir: Path, **overrides: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "name": "terminal",
        "output_dir": str(run_dir),
        "steps": 2,
        "async_ratio": 1,
        "trainer": {"model": "builtin:tiny-qwen3-moe", "micro_batch_tokens": 4096, "optimizer": {"lr": 1e-3}},
        # Training calls (temperature 1) always err: a group succeeds only where the prefix did the work.
        "engines": {"engine": {"type": "scripted", "mistake_rate": 1.0}},
        "env": {
            "type": "terminal",
            "task_ids": TASKS,
            "agent": {"max_turns": 3, "timeout_s": 120},
            "rock": {"slots": 4},
            "resampling": {"anchors": 2, "rollback": {"threshold": 0.5, "min_samples": 2}},
        },
        "rollout": {
            "num_workers": 1,
            "episodes_in_flight": 2,
            "group_size": 2,
            "groups_per_step": 2,
            "sampling": {"max_new_tokens": 256},
        },
        "resources": {"trainer_cpus": 0.25, "engine_cpus": 0.25, "trainer_threads": 1, "engine_threads": 1},
        "eval": {"episodes": 1, "sampling": {"temperature": 0.0, "max_new_tokens": 256}},
    }
    for key, value in overrides.items():
        config[key] = {**config.get(key, {}), **value} if isinstance(value, dict) else value
    return config


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def run(ray_session: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A finished 2-step run and what it printed."""
    from roll.pipeline.controller import train

    run_dir = tmp_path_factory.mktemp("terminal") / "run"
    out = io.StringIO()
    train(validate_config(TrainConfig, terminal_config(run_dir)), Console(file=out, width=160))
    yield run_dir, out.getvalue()


def test_a_two_step_terminal_run_trains_resampled_and_imitation_chunks(run: tuple[Path, str]) -> None:
    run_dir, printed = run
    records = read_jsonl(run_dir / "metrics.jsonl")
    assert [r["step"] for r in records] == [1, 2] and [r["version"] for r in records] == [1, 2]
    for record in records:
        assert record["staleness_max"] <= 1 and record["train/loss_tokens"] > 0
        assert record["workers_lost"] == 0 and record["buffer/infra_failed"] == 0
    # Step 1: each task's first group starts at the anchor its name's offset picks, for both tasks k = 0,
    # where the erring policy fails (and trains the expert's first step by imitation). Step 2: their second
    # groups start at the last expert step (k = 1: only the final message is left), where it succeeds.
    # Successes at k = 1 move each task's start back to k = 0.
    assert all(anchor_offset(task) % 2 == 1 for task in TASKS)
    assert [r["success"] for r in records] == [0.0, 1.0]
    assert all(records[-1][f"start/{task}"] == 0 for task in TASKS)
    assert sum(r.get("imitation_trajectories", 0) for r in records) >= 1
    assert records[-1]["buffer/imitation_groups"] >= 1
    # A success from k = 1 made the final message the policy's own: the expert book refreshed and saved.
    for task in TASKS:
        saved = json.loads((run_dir / "experts" / f"{task}.json").read_text())
        assert saved["origins"][0] == "oracle" and saved["origins"][1] != "oracle"
        assert saved["refreshes"][0]["start"] == 1
    evals = read_jsonl(run_dir / "eval.jsonl")
    assert [(e["label"], e["episodes"]) for e in evals] == [("before RL", 4), ("after RL", 4)]
    for record in evals:  # greedy calls never err: the oracle solves every task from every start
        assert record["by_start"] == {task: {"0": 1.0, "1": 1.0} for task in TASKS}
        assert sorted(record["won_seeds"]) == sorted(f"{task}@{k}" for task in TASKS for k in (0, 1))
    # Every sandbox came from a group create, by the fleet admin's own counters, and a group's episodes
    # (they start together) shared one.
    made = {key: sum(r.get(f"fleet/{key}", 0.0) for r in records) for key in ("sandboxes", "group_creates")}
    assert made["sandboxes"] >= 8 and 1 <= made["group_creates"] < made["sandboxes"]
    assert "Eval success by task and start point k" in printed
    assert "won 0 that it had lost, lost 0 that it had won (both won 4)" in printed
    assert (run_dir / "model" / "config.json").is_file()


def test_resume_continues_with_the_saved_expert_book(run: tuple[Path, str]) -> None:
    from roll.pipeline.controller import train

    run_dir, _ = run
    before = {task: json.loads((run_dir / "experts" / f"{task}.json").read_text()) for task in TASKS}
    out = io.StringIO()
    config = terminal_config(run_dir.parent / "run", steps=3, resume=True)
    train(validate_config(TrainConfig, config), Console(file=out, width=300))
    printed = out.getvalue()
    for task in TASKS:
        assert f"{task}: starts from its saved expert" in printed
        after = json.loads((run_dir / "experts" / f"{task}.json").read_text())
        assert after["refreshes"][: len(before[task]["refreshes"])] == before[task]["refreshes"]
    records = read_jsonl(run_dir / "metrics.jsonl")
    assert [r["step"] for r in records] == [1, 2, 3]
    # The rollback state came back from the checkpoint: the start stays at 0 instead of the oracle's k = 1.
    assert all(records[-1][f"start/{task}"] == 0 for task in TASKS)
    assert all(records[-1][f"expert_policy_steps/{task}"] >= 1 for task in TASKS)


def test_a_killed_worker_costs_only_its_episodes_and_leaves_no_sandbox(
    ray_session: None, tmp_path: Path
) -> None:
    import docker
    import ray

    from roll.pipeline.cluster import Cluster
    from roll.rollout.terminal.run import TerminalRun
    from roll.rollout.terminal.tasks import prepare_terminal_env

    # Every call takes 2 s, so episodes stay in their sandboxes long enough to be caught there. Two engines:
    # each worker's two episodes in flight go to different ones (sticky per episode, least loaded first).
    # The agent runs inside the sandbox here (the 2-step run has it on the host).
    config = terminal_config(
        tmp_path / "run",
        engines={"num_engines": 2, "engine": {"type": "scripted", "mistake_rate": 1.0, "latency_s": 2.0}},
        rollout={"num_workers": 2, "groups_per_step": 1},
    )
    config["env"]["agent"]["placement"] = "sandbox"
    config = validate_config(TrainConfig, config)
    prepare_terminal_env(config.env)
    cluster = Cluster(config, config.trainer.model, step=0, next_group=0)
    client = docker.from_env()
    try:
        cluster.sync_weights()
        cluster.set_step(0)
        terminal = cluster.env_run
        assert isinstance(terminal, TerminalRun)
        deadline = time.monotonic() + 180
        held: dict[str, list[str]] = {}
        while not held:
            assert time.monotonic() < deadline, "no rollout worker ever held a sandbox"
            time.sleep(0.1)
            held = ray.get(terminal.ledger.held.remote())
        victim, sandboxes = next(iter(held.items()))
        leased = ray.get(cluster.buffer.in_flight.remote(victim))
        ray.kill(cluster.workers[victim])
        batch = cluster.next_batch(0)  # replaces the dead worker on the way
        assert batch and cluster.workers_lost == 1 and victim not in cluster.workers
        played = [t for t in batch if not t.metadata.get("imitation")]
        assert played and all(t.metadata["end"] == "completed" for t in played)  # iflow ran in the sandbox
        assert all(stats["requests_finished"] > 0 for stats in cluster.engines.stats())
        stats = cluster.buffer_stats()
        assert stats["resampled_lost"] >= 1 and leased  # its episodes play again
        assert stats["infra_failed"] == 0  # the other worker's episodes went on undisturbed
        assert victim not in ray.get(terminal.ledger.held.remote())
        deadline = time.monotonic() + 60
        while left := [
            s for s in sandboxes if client.api.containers(all=True, filters={"label": f"rock.sandbox={s}"})
        ]:
            assert time.monotonic() < deadline, f"the dead worker's sandboxes {left} are still there"
            time.sleep(0.2)
    finally:
        cluster.shutdown()
        client.close()
