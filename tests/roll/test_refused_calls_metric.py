"""The step metrics count model calls the proxy refused to record (rock.proxy.continuity)."""

from __future__ import annotations

from rock.proxy.types import Chunk
from roll.pipeline.tracking import episode_metrics
from roll.types import Trajectory


def episode(refused: int | None) -> Trajectory:
    metadata = {
        "success": False,
        "turns": 1,
        "format_errors": 0,
        "output_tokens": 4,
        "truncated_outputs": 0,
        "gen_s": 1.0,
        "env_s": 1.0,
        "end": "completed",
        **({} if refused is None else {"refused_calls": refused}),
    }
    chunks = [Chunk(context_ids=[1], output_ids=[2], weight_version=0)]
    return Trajectory(chunks=chunks, reward=0.0, metadata=metadata)


def test_refused_calls_are_summed_over_the_steps_episodes() -> None:
    assert episode_metrics([episode(2), episode(0), episode(None), episode(1)])["refused_calls"] == 3
    assert episode_metrics([episode(None)])["refused_calls"] == 0
