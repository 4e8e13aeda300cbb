"""Process-group helpers and FSDP2 sharding for the torch backend."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn


def world() -> tuple[int, int]:
    """(rank, world size); (0, 1) without an initialised process group."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def shard_model(model: nn.Module) -> None:
    """FSDP2: shard every transformer block, then the root (embeddings, norm, LM head)."""
    from torch.distributed.fsdp import fully_shard

    block_names = set(getattr(model, "_no_split_modules", None) or [])
    blocks = [module for module in model.modules() if type(module).__name__ in block_names]
    if not blocks:
        raise ValueError(
            f"cannot find the transformer blocks of {type(model).__name__} to shard "
            "(its _no_split_modules is empty); use a transformers causal LM"
        )
    for block in blocks:
        fully_shard(block)
    fully_shard(model)


def gather_objects(value: Any) -> list[Any]:
    """Every rank's `value`, in rank order (just [value] when not distributed)."""
    _, size = world()
    if size == 1:
        return [value]
    out: list[Any] = [None] * size
    dist.all_gather_object(out, value)
    return out


def full_tensor(value: torch.Tensor) -> torch.Tensor:
    """The whole tensor behind a DTensor shard (or the tensor itself)."""
    to_full = getattr(value, "full_tensor", None)
    return to_full() if to_full is not None else value
