"""Initialized resampling's one entry point, as the terminal env manager calls it: `StartScheduler` over the
run's real `StartPoints` actor (Ray) on a real suite task."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rock.proxy.types import EpisodeRecord, RecordedChunk
from roll.rollout.episode import EpisodeTask
from roll.rollout.terminal.resampling.scheduler import EpisodeStart, StartScheduler
from roll.rollout.terminal.resampling.start_points import StartPoints
from roll.types import Chunk
from tests.roll.test_terminal_start_points import TASK, env

pytestmark = pytest.mark.slow


def failed_record(version: int) -> EpisodeRecord:
    """An episode whose one model call, at weight version `version`, gave up."""
    messages = [{"role": "system", "content": "You work in a shell."}, {"role": "user", "content": "Fix it."}]
    chunk = Chunk(context_ids=[1], output_ids=[2], output_logprobs=[0.0], weight_version=version)
    answer = {"role": "assistant", "content": "I give up."}
    recorded = RecordedChunk(chunk=chunk, messages=messages, answer=answer, latency_s=0.0)
    return EpisodeRecord(episode_id="ep-failed", chunks=[recorded])


def scheduler(tmp_path: Path, tokenizer: Any, **resampling: Any) -> tuple[StartScheduler, Any]:
    import ray

    config = env(**resampling)
    actor = ray.remote(StartPoints).options(num_cpus=0).remote(config, tmp_path / "experts", None)
    oracles = ray.get(actor.experts.remote())
    return StartScheduler(config, actor, oracles, tokenizer), actor


async def test_training_episodes_start_at_their_groups_point_and_a_failure_brings_the_fallback(
    ray_session: None, tiny_moe: Any, tmp_path: Path
) -> None:
    import ray

    starts, actor = scheduler(tmp_path, tiny_moe.tokenizer)
    oracle = ray.get(actor.experts.remote())[TASK]
    task = EpisodeTask("g0", seed=0)
    begun = await starts.begin(task, TASK)
    assert begun == EpisodeStart(3, oracle)  # the first group's anchor (test_terminal_start_points)
    assert await starts.begin(EpisodeTask("g0", seed=0, index=1), TASK) == begun  # one start per group

    fallback = await starts.finish(task, TASK, begun, failed_record(version=5), success=False)
    assert fallback is not None and fallback.group_id == "g0/expert"
    assert fallback.metadata == {"imitation": True, "success": True, "task": TASK, "start": 3}
    assert all(chunk.expert and chunk.weight_version == 5 for chunk in fallback.chunks)
    assert await starts.finish(task, TASK, begun, failed_record(version=5), success=True) is None
    assert ray.get(actor.state.remote())[TASK]["outcomes"] == {"3": [False, True]}
    ray.kill(actor)


async def test_evaluation_episodes_start_after_the_oracle_and_report_nothing(
    ray_session: None, tiny_moe: Any, tmp_path: Path
) -> None:
    import ray

    starts, actor = scheduler(tmp_path, tiny_moe.tokenizer, imitation=False)
    task = EpisodeTask(f"eval-{TASK}-k1", seed=0, start=1)
    begun = await starts.begin(task, TASK)
    assert begun == EpisodeStart(1, starts.oracles[TASK])
    assert await starts.finish(task, TASK, begun, failed_record(version=0), success=False) is None
    assert ray.get(actor.state.remote())[TASK]["outcomes"] == {}
    training = EpisodeTask("g0", seed=0)
    begun = await starts.begin(training, TASK)
    # Without env.resampling.imitation a failed training episode is only recorded.
    assert await starts.finish(training, TASK, begun, failed_record(version=0), success=False) is None
    assert ray.get(actor.state.remote())[TASK]["outcomes"] == {"3": [False]}
    ray.kill(actor)
