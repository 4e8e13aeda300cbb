"""Chunks, trajectories and packing into a padding-free batch."""

import pytest
import torch
from pydantic import ValidationError

from roll.algo.batch import PackedBatch
from roll.trainer.packing import pack_trajectories
from roll.types import Chunk, Trajectory


def _trajectories() -> list[Trajectory]:
    first = Trajectory(
        chunks=[
            Chunk(context_ids=[1, 2], output_ids=[3, 4], output_logprobs=[-0.1, -0.2]),
            # context = previous context + output + observation [5]: continues the same sequence
            Chunk(context_ids=[1, 2, 3, 4, 5], output_ids=[6], output_logprobs=[-0.3], error=True),
            # context does not extend the sequence: a new sequence starts
            Chunk(context_ids=[9], output_ids=[7], output_logprobs=[-0.4], weight_version=3),
        ],
        reward=1.0,
        task_id="t1",
        group_id="g1",
    )
    second = Trajectory(
        chunks=[Chunk(context_ids=[8], output_ids=[2, 3], relevant=False)], reward=-1.0, group_id="g2"
    )
    return [first, second]


def test_pack_shares_sequences_and_restarts_positions() -> None:
    batch = pack_trajectories(_trajectories())
    assert batch.input_ids.tolist() == [1, 2, 3, 4, 5, 6, 9, 7, 8, 2, 3]
    assert batch.position_ids.tolist() == [0, 1, 2, 3, 4, 5, 0, 1, 0, 1, 2]
    assert batch.seq_lens.tolist() == [6, 2, 3]
    assert batch.seq_traj.tolist() == [0, 0, 1]
    assert batch.loss_mask.tolist() == [0, 0, 1, 1, 0, 1, 0, 1, 0, 1, 1]
    assert batch.chunk_index.tolist() == [-1, -1, 0, 0, -1, 1, -1, 2, -1, 3, 3]
    assert batch.engine_logprobs.tolist() == pytest.approx([0, 0, -0.1, -0.2, 0, -0.3, 0, -0.4, 0, 0, 0])
    assert batch.chunk_pos.tolist() == [1, 2, 3, 1]
    assert batch.chunk_count.tolist() == [3, 3, 3, 1]
    assert batch.chunk_reward.tolist() == [1.0, 1.0, 1.0, -1.0]
    assert batch.chunk_group.tolist() == [0, 0, 0, 1]
    assert batch.chunk_version.tolist() == [0, 0, 3, 0]
    assert batch.chunk_error.tolist() == [False, True, False, False]
    assert batch.chunk_relevant.tolist() == [True, True, True, False]
    assert batch.chunk_has_engine_logprobs.tolist() == [True, True, True, False]
    assert batch.chunk_lengths().tolist() == [2, 1, 1, 2]
    assert batch.token_trajectory().tolist() == [0] * 8 + [1] * 3


def test_slice_trajectories_rebases_ids() -> None:
    batch = pack_trajectories(_trajectories())
    second = batch.slice_trajectories(1, 2)
    assert second.input_ids.tolist() == [8, 2, 3]
    assert second.chunk_index.tolist() == [-1, 0, 0]
    assert second.chunk_traj.tolist() == [0]
    assert second.seq_traj.tolist() == [0]
    assert second.chunk_reward.tolist() == [-1.0]


def test_json_round_trip() -> None:
    trajectories = _trajectories()
    again = [Trajectory.model_validate_json(t.model_dump_json()) for t in trajectories]
    assert again == trajectories
    batch = pack_trajectories(trajectories)
    restored = PackedBatch.from_json_dict(batch.to_json_dict())
    for name, value in vars(batch).items():
        other = getattr(restored, name)
        if isinstance(value, torch.Tensor):
            assert torch.equal(value, other), name
            assert value.dtype == other.dtype, name
        else:
            assert value == other, name


def test_chunk_rejects_mismatched_logprobs() -> None:
    with pytest.raises(ValidationError, match="one engine logprob per generated token"):
        Chunk(context_ids=[1], output_ids=[2, 3], output_logprobs=[-0.1])
