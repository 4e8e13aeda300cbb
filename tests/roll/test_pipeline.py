"""The whole pipeline on Ray with the tiny model: a short synchronous run; weight sync and a rollout worker
killed mid-run on a live cluster; and an asynchronous run (two engines, multiplexed, aborting weight sync)
whose driver is killed and which then resumes from its last checkpoint."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from roll.config import validate_config
from roll.pipeline.config import TrainConfig

pytestmark = pytest.mark.slow


def tiny_config(run_dir: Path, **overrides: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "name": "tiny",
        "output_dir": str(run_dir),
        "steps": 2,
        "async_ratio": 1,
        "trainer": {"model": "builtin:tiny-qwen3-moe", "micro_batch_tokens": 2048, "optimizer": {"lr": 1e-2}},
        "env": {"env_id": "game:GuessTheNumber-v0-easy", "max_turns": 3, "format_pattern": r"\\boxed\{"},
        "rollout": {
            "num_workers": 2,
            "episodes_in_flight": 3,
            "group_size": 2,
            "groups_per_step": 2,
            "sampling": {"max_new_tokens": 6},
        },
        "resources": {"trainer_cpus": 0.25, "engine_cpus": 0.25, "trainer_threads": 1, "engine_threads": 1},
        "eval": {"episodes": 2, "sampling": {"max_new_tokens": 6}},
    }
    for key, value in overrides.items():
        config[key] = {**config.get(key, {}), **value} if isinstance(value, dict) else value
    return config


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def check_run(
    run_dir: Path, steps: int, async_ratio: int, first_evals: tuple[str, ...] = ("before RL",)
) -> list[dict[str, Any]]:
    """What every finished run must show; returns its step records."""
    from roll.plot import plot_run

    records = read_jsonl(run_dir / "metrics.jsonl")
    assert [s["step"] for s in records] == list(range(1, steps + 1))
    assert [s["version"] for s in records] == list(range(1, steps + 1))
    for record in records:
        assert record["episodes"] >= 2 and record["train/loss_tokens"] > 0
        assert record["staleness_max"] <= async_ratio  # no trained chunk older than the bound
        assert record["workers_lost"] == 0 and record["buffer/infra_failed"] == 0
    eval_records = read_jsonl(run_dir / "eval.jsonl")
    for record in eval_records:  # the seeds won, for the summary's seed-by-seed comparison
        assert len(record["won_seeds"]) == round(record["success"] * record["episodes"])
        assert len(record["seed_rewards"]) == record["episodes"]
    evals = [(e["label"], e["step"], e["episodes"]) for e in eval_records]
    assert evals == [*((label, 0, 2) for label in first_evals), ("after RL", steps, 2)]
    assert (run_dir / "checkpoints" / f"step_{steps:06d}" / "pipeline.json").is_file()
    assert any((run_dir / "tensorboard").iterdir())
    assert plot_run(run_dir).read_bytes()[:4] == b"\x89PNG"
    assert (run_dir / "model" / "config.json").is_file()
    return records


def test_short_synchronous_run_after_an_sft_warm_start(ray_session: None, tmp_path: Path) -> None:
    from roll.pipeline.controller import train

    sft_dir = tmp_path / "sft"
    warm_start = {
        "sft_config": "configs/sft.yaml",
        "overrides": [
            "trainer.model=builtin:tiny-qwen3-moe",
            "max_steps=1",
            "batch_size=2",
            f"output_dir={sft_dir}",
        ],
    }
    greedy = {"episodes": 2, "sampling": {"max_new_tokens": 6, "temperature": 0.0}}
    config = tiny_config(
        tmp_path / "run", async_ratio=0, rollout={"num_workers": 1}, warm_start=warm_start, eval=greedy
    )
    train(validate_config(TrainConfig, config))
    records = check_run(tmp_path / "run", steps=2, async_ratio=0, first_evals=("base", "after SFT"))
    assert all(s["staleness_max"] == 0 and s["engines_slept"] == 0 for s in records)
    # the base model was evaluated first, then RL started from the SFT run's export
    first = read_jsonl(tmp_path / "run" / "eval.jsonl")
    assert [e.get("model") for e in first] == ["builtin:tiny-qwen3-moe", str(sft_dir / "model"), None]
    assert json.loads((sft_dir / "metrics.jsonl").read_text().splitlines()[-1])["step"] == 1
    assert not any("reused" in e for e in first)

    # A second run beside it (the next seed of a table: same weights, settings, tasks and code) takes the
    # stored greedy evaluations of the base and SFT models; the one after its own RL steps plays.
    train(validate_config(TrainConfig, {**config, "output_dir": str(tmp_path / "again")}))
    check_run(tmp_path / "again", steps=2, async_ratio=0, first_evals=("base", "after SFT"))
    again = read_jsonl(tmp_path / "again" / "eval.jsonl")
    assert [e.get("reused") for e in again] == ["run (base)", "run (after SFT)", None]
    for before, now in zip(first[:2], again[:2], strict=True):
        assert (now["won_seeds"], now["seed_rewards"]) == (before["won_seeds"], before["seed_rewards"])
    assert len(list((tmp_path / "again" / "episodes" / "eval" / "base").glob("*.json"))) == 2


@pytest.fixture(scope="module")
def cluster(ray_session: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A running pipeline whose env steps take 0.3 s, so episodes stay in flight long enough to kill. Its
    tests drive it for up to 6 batches, and the buffer makes none past `steps`."""
    from roll.pipeline.cluster import Cluster

    run_dir = tmp_path_factory.mktemp("cluster")
    config = validate_config(TrainConfig, tiny_config(run_dir, steps=6, env={"latency_s": 0.3}))
    cluster = Cluster(config, config.trainer.model, step=0, next_group=0)
    cluster.sync_weights()
    cluster.set_step(0)
    yield cluster
    cluster.shutdown()


def test_weight_sync_reaches_every_engine_and_changes_outputs(cluster: Any) -> None:
    import ray

    from roll.engine.types import GenerateRequest, SamplingParams

    probe = {"prompt_token_ids": [1, 2, 3, 4, 5], "params": SamplingParams(max_new_tokens=8, temperature=0.0)}
    engine = cluster.engines.handles[0]
    before = ray.get(engine.generate.remote(GenerateRequest(request_id="probe-0", **probe)))
    cluster.train_step(cluster.next_batch(0))
    assert cluster.sync_weights() == 1
    cluster.set_step(1)
    after = ray.get(engine.generate.remote(GenerateRequest(request_id="probe-1", **probe)))
    assert (before.weight_version, after.weight_version) == (0, 1)
    assert [s["weight_version"] for s in cluster.engines.stats()] == [1]
    old, new = before.completions[0], after.completions[0]
    assert (old.token_ids, old.logprobs) != (new.token_ids, new.logprobs)


def test_killed_rollout_worker_is_replaced_and_its_episodes_resampled(cluster: Any) -> None:
    import ray

    cluster.train_step(cluster.next_batch(1))
    cluster.sync_weights()
    cluster.set_step(2)  # groups g6 and g7 may start now, on version 2
    deadline = time.monotonic() + 120
    held: list[Any] = []
    while not held:
        assert time.monotonic() < deadline, "no worker ever held an episode of g6 or g7"
        time.sleep(0.05)
        for victim in cluster.workers:
            leased = ray.get(cluster.buffer.in_flight.remote(victim))
            if held := [t for t in leased if t.group_id in {"g6", "g7"}]:
                break
    ray.kill(cluster.workers[victim])
    missing = {(task.group_id, task.index) for task in held}
    # The run goes on, and every episode of g6/g7 that w0 held turns up, played again, in a batch.
    for _ in range(4):
        batch = cluster.next_batch(2)
        missing -= {(t.group_id, t.metadata["index"]) for t in batch}
        if not missing:
            break
    assert not missing
    assert cluster.workers_lost == 1 and victim not in cluster.workers and len(cluster.workers) == 2
    assert cluster.buffer_stats()["resampled_lost"] >= 1


def test_resume_after_the_driver_is_killed(ray_session: None, tmp_path: Path) -> None:
    import ray

    from roll.pipeline.controller import train

    run_dir = tmp_path / "run"
    config = tiny_config(
        run_dir,
        steps=3,
        env={"latency_s": 0.2},
        engines={"num_engines": 2, "weight_sync": "abort"},
        multiplex={"enabled": True, "min_awake": 1},
        reward={"normalization": "group"},
    )
    config_file = tmp_path / "tiny.yaml"
    config_file.write_text(yaml.safe_dump(config))
    address = ray.get_runtime_context().gcs_address
    command = [sys.executable, "-m", "roll.cli", "train", str(config_file), f"ray.address={address}"]
    with (tmp_path / "driver.log").open("w") as out:
        driver = subprocess.Popen(command, stdout=out, stderr=out, start_new_session=True)
    latest = run_dir / "checkpoints" / "latest"
    deadline = time.monotonic() + 180
    while not latest.is_file():
        assert driver.poll() is None, (tmp_path / "driver.log").read_text()[-3000:]
        assert time.monotonic() < deadline, "no checkpoint within 180 s"
        time.sleep(0.05)
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait()
    killed_at = int(latest.read_text().removeprefix("step_"))
    assert killed_at < 3
    # Its output went to a file, not a terminal: every eval and train step so far is one plain line there.
    log = (tmp_path / "driver.log").read_text()
    assert re.search(r"^eval before RL \(step 0\): success \d+% \(\d/2\) · reward ", log, re.M), log
    for step in range(1, killed_at + 1):
        assert re.search(rf"^step {step}/3 \[\d+s\] reward [-+]\d\.\d{{3}} · success ", log, re.M), log

    train(validate_config(TrainConfig, {**config, "resume": True}))
    check_run(run_dir, steps=3, async_ratio=1)  # each step exactly once, across the kill
    checkpoint = json.loads((run_dir / "checkpoints" / "step_000003" / "checkpoint.json").read_text())
    assert checkpoint["step"] == 3


def test_summary_compares_evaluations_seed_by_seed() -> None:
    from roll.pipeline.display import paired_line, sign_test_p

    assert sign_test_p(0, 0) == 1.0
    assert sign_test_p(3, 3) == 1.0
    assert sign_test_p(10, 0) == pytest.approx(2 / 2**10)
    assert sign_test_p(1, 4) == pytest.approx(2 * (1 + 5) / 2**5)  # P(<= 1 of 5), both tails
    before = {"label": "after SFT", "episodes": 4, "won_seeds": [0, 1]}
    after = {"label": "after RL", "episodes": 4, "won_seeds": [1, 2, 3]}
    line = paired_line(before, after)
    assert line is not None and "won 2 that it had lost, lost 1 that it had won (both won 1)" in line
    assert line.endswith("sign test p = 1")
    assert paired_line({"label": "old", "episodes": 4}, after) is None
    # A strong gain keeps its significant digits instead of rounding to "p = 0.000": 2 / 2**20.
    strong = paired_line(
        {**before, "episodes": 20, "won_seeds": []}, {**after, "episodes": 20, "won_seeds": list(range(20))}
    )
    assert strong is not None and "sign test p = 1.91e-06" in strong
    before["seed_rewards"] = {"0": 1.0, "1": 1.0, "2": 0.5}
    after["seed_rewards"] = {"0": 0.5, "1": 1.0, "2": 1.0, "3": 1.0}  # seed 3 only once: left out
    line = paired_line(before, after)
    assert line is not None and line.endswith("reward +0.000 per seed (paired standard error 0.289)")
