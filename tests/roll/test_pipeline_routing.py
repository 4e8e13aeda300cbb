"""Sticky, least-loaded routing of episodes to engines: the router alone, then two real engines on Ray where
each engine's request count must equal the turns of the episodes routed to it."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from roll.rollout.routing import EngineRouter
from roll.testing import ScriptedEngine


def test_new_episodes_go_to_the_least_loaded_active_engine() -> None:
    router = EngineRouter(3)
    assert [router.acquire() for _ in range(4)] == [0, 1, 2, 0]
    router.release(1)
    assert router.acquire() == 1  # engine 1 has the fewest episodes again
    router.set_active([2])
    assert [router.acquire(), router.acquire()] == [2, 2]
    assert router.load == [2, 1, 3]
    router.set_active([])
    assert router.acquire() == 1


def test_router_refuses_unknown_engines_and_extra_releases() -> None:
    router = EngineRouter(2)
    with pytest.raises(ValueError, match=r"out of range 0\.\.1"):
        router.set_active([2])
    with pytest.raises(ValueError, match="no episode in flight"):
        router.release(0)
    with pytest.raises(ValueError, match="at least one engine"):
        EngineRouter(0)


def test_every_call_of_an_episode_reaches_the_engine_it_started_on(ray_session: None) -> None:
    """Each engine is the scripted test double of the LLM with its own guess (both out of range, so games
    run to max_turns): an episode's outputs show which engines served its calls."""
    import ray

    from roll.models import resolve_model_path
    from roll.rollout.config import GEMEnvConfig, SamplingConfig
    from roll.rollout.episode import EpisodeTask
    from roll.rollout.worker import RolloutWorker

    folder = str(resolve_model_path("builtin:tiny-qwen3-moe"))
    tokenizer = AutoTokenizer.from_pretrained(folder)
    replies = ["\\boxed{11}", "\\boxed{12}"]
    engines = [
        ray.remote(ScriptedEngine).options(num_cpus=0).remote(tokenizer, [reply] * 30) for reply in replies
    ]
    env = GEMEnvConfig(env_id="game:GuessTheNumber-v0-easy", max_turns=3, latency_s=0.02)
    worker = (
        ray.remote(RolloutWorker)
        .options(num_cpus=0)
        .remote("w0", folder, env, SamplingConfig(), 6, engines, None)
    )
    try:
        tasks = [EpisodeTask(f"e{seed}", seed) for seed in range(6)]
        played = ray.get(worker.evaluate.remote(tasks, SamplingConfig()))
    finally:
        for handle in [worker, *engines]:
            ray.kill(handle)
    assert [t.metadata["turns"] for t in played] == [3] * 6
    engine_of = [t.metadata["engine"] for t in played]
    assert sorted(engine_of) == [0, 0, 0, 1, 1, 1]  # started together: spread evenly
    for trajectory, engine in zip(played, engine_of, strict=True):
        outputs = {
            tokenizer.decode(chunk.output_ids, skip_special_tokens=True) for chunk in trajectory.chunks
        }
        assert outputs == {replies[engine]}
