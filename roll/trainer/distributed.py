"""Process-group helpers (a trainer rank joining its group) and FSDP2 sharding for the torch backend."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.distributed as dist
from torch import nn


def world() -> tuple[int, int]:
    """(rank, world size); (0, 1) without an initialised process group."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


@dataclass(frozen=True)
class Rendezvous:
    """Where and as which rank a trainer process joins its group's process group."""

    rank: int
    world_size: int
    local_rank: int  # rank among the group's processes on the same node
    master_addr: str  # rank 0's node (127.0.0.1 when every rank runs on one machine)
    master_port: int
    backend: Literal["gloo", "nccl"]


def free_port() -> int:
    """A TCP port nobody on this node listens on right now (for rank 0's store)."""
    with socket.socket() as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


def join_process_group(rendezvous: Rendezvous, cuda_device: int | None) -> None:
    """Set the variables torchrun would (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT; backends
    such as Megatron read them), select `cuda_device` for NCCL, and initialise the default process group.
    Returns when every rank has joined."""
    os.environ.update(
        RANK=str(rendezvous.rank),
        WORLD_SIZE=str(rendezvous.world_size),
        LOCAL_RANK=str(rendezvous.local_rank),
        MASTER_ADDR=rendezvous.master_addr,
        MASTER_PORT=str(rendezvous.master_port),
    )
    if rendezvous.backend == "nccl":
        if cuda_device is None:
            raise ValueError("the nccl process group needs a CUDA device; pass cuda_device")
        torch.cuda.set_device(cuda_device)
    dist.init_process_group(
        rendezvous.backend, rank=rendezvous.rank, world_size=rendezvous.world_size, init_method="env://"
    )


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
