"""The trainer group on Ray: two trainer actors in one gloo process group (FSDP2, CPU) take the same step as
one actor, save and load a checkpoint together, report a dead rank, and train a short `roll train` run whose
engines get every new version."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import torch

from roll.algo.config import IPALossConfig
from roll.pipeline.config import ResourcesConfig
from roll.trainer.config import OptimizerConfig, TorchBackendConfig
from roll.types import Chunk, Trajectory
from tests.roll.test_pipeline import check_run, read_jsonl, tiny_config

if TYPE_CHECKING:
    from roll.pipeline.trainer_group import TrainerGroup

MODEL = "builtin:tiny-qwen3-moe"
TOLERANCE = 1e-6  # absolute, on every weight after one AdamW step at lr 1e-3 (float32 sums differ in order)


def trajectories(seed: int) -> list[Trajectory]:
    """Five trajectories; at one trajectory per micro-batch, rank 1 of two makes one idle pass."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for i in range(5):
        context = torch.randint(1, 1000, (6 + i,), generator=gen).tolist()
        output = torch.randint(1, 1000, (4,), generator=gen).tolist()
        chunk = Chunk(context_ids=context, output_ids=output, output_logprobs=[-5.0, -5.1, -5.2, -5.3])
        out.append(Trajectory(chunks=[chunk], reward=1.0 if i % 2 else -1.0, group_id=str(i // 2)))
    return out


def group(ranks: int) -> TrainerGroup:
    from roll.pipeline.trainer_group import TrainerGroup

    config = TorchBackendConfig(model=MODEL, micro_batch_tokens=1, optimizer=OptimizerConfig(lr=1e-3))
    resources = ResourcesConfig(trainer_ranks=ranks, trainer_cpus=0.25, trainer_threads=1)
    return TrainerGroup(config, IPALossConfig(group_baseline=True, mismatch_high=100.0), resources)


def weights(trainers: TrainerGroup) -> tuple[dict[str, torch.Tensor], int]:
    """The weights as an engine reads them from the object store."""
    import ray

    from roll.pipeline.weight_sync.object_store import from_object_store

    ref, version = trainers.weights()
    return from_object_store(ray.get(ref)), version


def test_ranks_are_numbered_node_by_node_with_the_store_on_rank_0s_node() -> None:
    from roll.pipeline.trainer_group import by_node, process_group_backend, rendezvous_for
    from roll.trainer.megatron.config import MegatronBackendConfig

    placed = ["10.0.0.2", "10.0.0.1", "10.0.0.2", "10.0.0.1", "10.0.0.3"]
    order = by_node(placed)
    assert order == [0, 2, 1, 3, 4]
    plan = rendezvous_for([placed[i] for i in order], 29500, "nccl")
    assert [(r.rank, r.local_rank) for r in plan] == [(0, 0), (1, 1), (2, 0), (3, 1), (4, 0)]
    assert {(r.world_size, r.master_addr, r.master_port, r.backend) for r in plan} == {
        (5, "10.0.0.2", 29500, "nccl")
    }
    # all on one machine: the store listens on loopback
    assert [r.master_addr for r in rendezvous_for(["10.0.0.9"] * 2, 29500, "gloo")] == ["127.0.0.1"] * 2
    assert process_group_backend(TorchBackendConfig()) == "gloo"
    assert process_group_backend(TorchBackendConfig(device="cuda:0")) == "nccl"
    assert process_group_backend(MegatronBackendConfig()) == "nccl"


def test_weights_broadcast_to_engines_needs_the_megatron_trainer(tmp_path: Path) -> None:
    from roll.config import validate_config
    from roll.pipeline.config import TrainConfig
    from roll.pipeline.weight_sync import WeightSyncError, broadcasts_weights

    def config(**overrides: Any) -> TrainConfig:
        return validate_config(TrainConfig, tiny_config(tmp_path, **overrides))

    sglang = {"engine": {"type": "sglang", "weight_update": "distributed"}}
    megatron = {"type": "megatron", "model": MODEL}
    assert broadcasts_weights(config(engines=sglang, trainer=megatron))
    assert not broadcasts_weights(config(trainer=megatron))
    with pytest.raises(WeightSyncError, match=r"weight_update: distributed needs trainer\.type: megatron"):
        broadcasts_weights(config(engines=sglang))


def test_roles_that_do_not_fit_the_local_ray_are_refused(ray_session: None, tmp_path: Path) -> None:
    from roll.config import validate_config
    from roll.pipeline.cluster import Cluster, PipelineError
    from roll.pipeline.config import TrainConfig

    resources = {"trainer_ranks": 3, "trainer_cpus": 0.75}  # 2.25 + 0.25 for the engine > 2 CPUs
    config = validate_config(TrainConfig, tiny_config(tmp_path, resources=resources))
    with pytest.raises(PipelineError, match=r"2\.5 CPUs .*trainer_ranks 3 .*the local Ray has 2"):
        Cluster(config, config.trainer.model, step=0, next_group=0)


def world(trainers: TrainerGroup) -> list[tuple[int, int]]:
    """Each rank's (rank, world size) as its backend sees them."""
    import ray

    def backend_world(actor: Any) -> tuple[int, int]:
        return actor.backend.rank, actor.backend.world_size

    return ray.get([h.__ray_call__.remote(backend_world) for h in trainers.handles])


@pytest.mark.slow
def test_two_ranks_take_the_same_step_as_one(ray_session: None, tmp_path: Path) -> None:
    import ray

    from roll.pipeline.trainer_group import RankLost

    single, pair = group(1), group(2)
    try:
        single.ready()
        pair.ready()
        assert world(single) == [(0, 1)]
        assert world(pair) == [(0, 2), (1, 2)]  # one process group, so the backend shards with FSDP2
        initial, version = weights(pair)
        assert version == 0
        batch = trajectories(seed=1)
        torch.testing.assert_close(pair.logprobs(batch), single.logprobs(batch), atol=TOLERANCE, rtol=0)

        one, two = single.train_step(batch), pair.train_step(batch)
        assert two["loss"] == pytest.approx(one["loss"], abs=TOLERANCE)
        assert two["grad_norm"] == pytest.approx(one["grad_norm"], rel=1e-5)
        (one_weights, one_version), (two_weights, two_version) = weights(single), weights(pair)
        assert one_version == two_version == 1
        assert one_weights.keys() == two_weights.keys() == initial.keys()
        for name, value in one_weights.items():
            torch.testing.assert_close(two_weights[name], value, atol=TOLERANCE, rtol=0)
        assert any(not torch.equal(one_weights[n], initial[n]) for n in initial), "no weight moved"

        # A checkpoint of both ranks, then a step, then back to the checkpoint: the step repeats exactly.
        pair.save(str(tmp_path / "ckpt"))
        pair.train_step(trajectories(seed=2))
        after_step_2, _ = weights(pair)
        assert pair.load(str(tmp_path / "ckpt")) == 1
        pair.train_step(trajectories(seed=2))
        again, version = weights(pair)
        assert version == 2
        for name, value in after_step_2.items():
            torch.testing.assert_close(again[name], value, atol=0, rtol=0)

        pair.export_hf(str(tmp_path / "hf"))
        assert (tmp_path / "hf" / "config.json").is_file()

        # A dead rank is named at the next call; rank 0, stuck or failing in a collective, is not waited for.
        ray.kill(pair.handles[1])
        with pytest.raises(RankLost, match="trainer rank 1 of 2 died"):
            pair.train_step(trajectories(seed=3))
    finally:
        single.kill()
        pair.kill()


@pytest.mark.slow
def test_short_run_with_two_trainer_ranks(ray_session: None, tmp_path: Path) -> None:
    from roll.config import validate_config
    from roll.pipeline.config import TrainConfig
    from roll.pipeline.controller import train

    resources = {"trainer_ranks": 2, "trainer_cpus": 0.25, "trainer_threads": 1}
    config = tiny_config(tmp_path, async_ratio=0, rollout={"num_workers": 1}, resources=resources)
    train(validate_config(TrainConfig, config))
    # Synchronous (staleness 0): step 2's episodes all came from version 1, which the engines got from
    # the group; Cluster.sync_weights also checks every engine reports the trainer's version.
    records = check_run(tmp_path, steps=2, async_ratio=0)
    assert [r["train/step"] for r in records] == [1, 2]
    assert read_jsonl(tmp_path / "eval.jsonl")[-1]["label"] == "after RL"
