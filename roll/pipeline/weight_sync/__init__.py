"""Weight sync: the trainer's weights reach every engine, one module per transport behind `WeightSync`.

- `object_store.ObjectStoreSync` (`weight_update: tensor`, any trainer and engine): trainer rank 0 puts the
  gathered state dict in Ray's object store; every engine fetches it and loads it between requests.
- `distributed.DistributedSync` (`weight_update: distributed`, Megatron trainer to SGLang engines): trainer
  rank 0 and the engines' tensor parallel ranks form one torch.distributed group (NCCL on GPUs) once; each
  sync is a broadcast per tensor, sent by the trainer's backend and received by the engines at the same time.

The tensors' wire description (`roll.types.TensorSpec`, `roll.types.WEIGHT_GROUP`) is shared by both ends, so
neither `roll.engine` nor `roll.trainer` imports the other for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from roll.pipeline.cluster import EngineGroup
    from roll.pipeline.config import TrainConfig
    from roll.pipeline.trainer_group import TrainerGroup


class WeightSyncError(RuntimeError):
    """Weights cannot reach the engines: a transport the config cannot use, or an engine that did not load."""


class WeightSync(Protocol):
    def push(self) -> int:
        """Send the trainer's current weights to every engine; returns the version they all serve now."""


def check_served(served: list[int], version: int) -> int:
    if any(v != version for v in served):
        raise WeightSyncError(
            f"after a weight sync the engines serve versions {served}, the trainer is at {version}; "
            "an engine failed to load the new weights (see its log)"
        )
    return version


def broadcasts_weights(config: TrainConfig) -> bool:
    """Whether weights reach the engines over a process group (SGLang's weight_update: distributed), which
    the megatron backend sends; else they go as tensors through Ray's object store."""
    engine = config.engines.engine
    if engine.type != "sglang" or engine.weight_update != "distributed":
        return False
    if config.trainer.type != "megatron":
        raise WeightSyncError(
            "engines.engine.weight_update: distributed needs trainer.type: megatron (its rank 0 broadcasts "
            "the weights); set weight_update: tensor for the torch trainer"
        )
    return True


def make_weight_sync(config: TrainConfig, trainer: TrainerGroup, engines: EngineGroup) -> WeightSync:
    """The transport the config asks for, ready to push (the distributed one has formed its group)."""
    if broadcasts_weights(config):
        from roll.pipeline.weight_sync.distributed import DistributedSync

        return DistributedSync(trainer, engines, config.engines.engine.tp_size)
    from roll.pipeline.weight_sync.object_store import ObjectStoreSync

    return ObjectStoreSync(trainer, engines)
