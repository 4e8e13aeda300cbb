"""Training data types: the chunks of an episode and its trajectory.

A chunk is one LLM call of an agent: the context token ids it was sent, the tokens the engine produced,
their logprobs and the weight version. It is the ModelProxyService's wire record (`rock.proxy.types`), so
the proxy records it without loading training code. A trajectory is the ordered chunks of one episode plus
its reward. Both cross processes as JSON; the packed tensors the trainer runs on are in
`roll.trainer.packing`. `TensorSpec` describes one weight on its way from the trainer to the engines
(`roll.pipeline.weight_sync`). This module does not import torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rock.proxy.types import Chunk

__all__ = ["WEIGHT_GROUP", "Chunk", "TensorSpec", "Trajectory"]

# The weights group (weight_update: distributed) a trainer's rank 0 broadcasts over and engines join.
WEIGHT_GROUP = "roll-weights"


class Trajectory(BaseModel):
    """The ordered chunks of one episode and its final reward."""

    model_config = ConfigDict(extra="forbid")

    chunks: list[Chunk] = Field(min_length=1)
    reward: float
    task_id: str = ""
    group_id: str = Field("", description="Trajectories sampled for the same task share a group id.")
    metadata: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True)
class TensorSpec:
    """Name, dtype and shape of one weight, as SGLang's `update_weights_from_distributed` takes them."""

    name: str
    dtype: str
    shape: tuple[int, ...]
