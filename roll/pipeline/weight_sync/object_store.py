"""Weights as tensors through Ray's object store (`weight_update: tensor`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import ray

from roll.pipeline.weight_sync import check_served

if TYPE_CHECKING:
    from roll.pipeline.cluster import EngineGroup
    from roll.pipeline.trainer_group import TrainerGroup


class ObjectStoreSync:
    """Trainer rank 0 puts the full state dict in the object store once; each engine resolves the reference
    itself, so the tensors never pass through the driver."""

    def __init__(self, trainer: TrainerGroup, engines: EngineGroup) -> None:
        self.trainer = trainer
        self.engines = engines

    def push(self) -> int:
        weights, version = self.trainer.weights()
        mode = self.engines.weight_sync
        served = ray.get([h.update_weights.remote(weights, version, mode) for h in self.engines.handles])
        return check_served(served, version)
