"""Weights broadcast over a torch.distributed group (`weight_update: distributed`; NCCL on GPUs).

The group joins trainer rank 0 (group rank 0, the sender) and every engine's tensor parallel ranks (engine i
holds ranks 1 + i * tp_size .. (i + 1) * tp_size). The sending and receiving halves live with their ends
(`roll.trainer.megatron.weight_sync`, `roll.engine.sglang.runtime`); this module forms the group and runs
both halves of a sync together, since each blocks until the other side joins the collective.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from roll.pipeline.trainer_group import all_ranks
from roll.pipeline.weight_sync import check_served

if TYPE_CHECKING:
    from roll.pipeline.cluster import EngineGroup
    from roll.pipeline.trainer_group import TrainerGroup
    from roll.types import TensorSpec


class DistributedSync:
    def __init__(self, trainer: TrainerGroup, engines: EngineGroup, tp_size: int) -> None:
        self.trainer = trainer
        self.engines = engines
        self.specs = self._form_group(tp_size)

    def _form_group(self, tp_size: int) -> list[TensorSpec]:
        """Every member joins at once (the store waits for all); returns what each broadcast sends."""
        address, port = self.trainer.weight_group_address()
        world_size = 1 + len(self.engines.handles) * tp_size
        joins = [
            h.join_weight_group.remote(address, port, 1 + index * tp_size, world_size)
            for index, h in enumerate(self.engines.handles)
        ]
        trainer_joins = self.trainer.join_weight_group(address, port, world_size)
        all_ranks([*trainer_joins, *joins], [*self.trainer.rank_names(), *self.engines.names])
        return self.trainer.weight_specs()

    def push(self) -> int:
        version = self.trainer.version()
        mode = self.engines.weight_sync
        receives = [
            h.update_weights_from_group.remote(self.specs, version, mode) for h in self.engines.handles
        ]
        calls = [*receives, *self.trainer.broadcast_weights()]
        served = all_ranks(calls, [*self.engines.names, *self.trainer.rank_names()])
        return check_served(served[: len(self.engines.handles)], version)
