"""The trainer's side of `weight_update: distributed`: trained weights broadcast to SGLang engines.

One weights group joins trainer rank 0 (group rank 0, the sender) and every engine's tensor parallel ranks
(`rank_offset` .. `rank_offset + tp_size - 1`, joined by `Engine.init_weights_update_group`). It is formed the
way SGLang forms it on the engine side: rank 0 hosts a TCP store at `master_address:master_port`, the group's
keys live under `group_name`, and the group is a second main group of each process (its ranks are the group's
own, next to the trainer's Megatron groups or the engine's TP group).

A sync sends the tensors of `gather_hf_buckets` (Hugging Face checkpoint names, which SGLang's loader takes),
one broadcast each, in the order of `weight_specs`; the engines receive the same specs with
`update_weights_from_distributed` in buckets of their own size (broadcasts match by order, not by bucket).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from safetensors import safe_open

from roll.trainer.megatron.mapping import ModelShape, rules
from roll.types import WEIGHT_GROUP, TensorSpec


def init_weight_group(
    master_address: str,
    master_port: int,
    rank: int,
    world_size: int,
    group_name: str = WEIGHT_GROUP,
    backend: str = "nccl",
    timeout: timedelta = timedelta(minutes=10),
) -> dist.ProcessGroup:
    """Join the weights group as `rank` (0: the trainer's sender); returns once all `world_size` joined.

    torch.distributed has one public main group per process, which Megatron (or SGLang's TP group) already
    holds; a second one, as SGLang builds it, needs c10d's group constructor directly."""
    from torch.distributed.distributed_c10d import PrefixStore, _new_process_group_helper, _world

    # The store SGLang's rendezvous makes (rank 0 serves it), built directly: under torchrun, rendezvous would
    # look for the elastic agent's store instead and never find rank 0's.
    store = dist.TCPStore(master_address, master_port, world_size, rank == 0, timeout=timeout)
    group, _ = _new_process_group_helper(
        world_size, rank, [], backend, PrefixStore(group_name, store), group_name=group_name, timeout=timeout
    )
    _world.pg_group_ranks[group] = {i: i for i in range(world_size)}
    return group


def weight_specs(folder: Path, shape: ModelShape, dtype: torch.dtype) -> list[TensorSpec]:
    """Name, dtype and shape of every tensor a sync sends, in sending order, without gathering anything:
    shapes are the checkpoint's (the HF layout the gather restores), the dtype the trained parameters'."""
    shapes: dict[str, tuple[int, ...]] = {}
    for file in sorted(Path(folder).glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as handle:
            shapes.update({name: tuple(handle.get_slice(name).get_shape()) for name in handle.keys()})  # noqa: SIM118
    dtype_name = str(dtype).removeprefix("torch.")
    specs = []
    for rule in rules(shape):
        for name in rule.hf:
            if name not in shapes:
                raise KeyError(f"{folder} has no tensor {name}; is it the model the trainer was built from?")
            specs.append(TensorSpec(name, dtype_name, shapes[name]))
    return specs


def broadcast_buckets(
    buckets: Iterable[list[tuple[str, torch.Tensor]]],
    specs: list[TensorSpec],
    group: dist.ProcessGroup | None,
) -> int:
    """Consume the gathered buckets (every trainer rank must: the gather is collective); the sender (the one
    rank holding `group`) broadcasts each tensor to the engines, checked against `specs` first, since an
    engine that allocated another shape would wait or fail inside the collective. Returns tensors sent."""
    sent = 0
    for bucket in buckets:
        if group is None:
            continue
        for name, tensor in bucket:
            spec = specs[sent] if sent < len(specs) else None
            got = TensorSpec(name, str(tensor.dtype).removeprefix("torch."), tuple(tensor.shape))
            if got != spec:
                raise RuntimeError(
                    f"weight sync: tensor {sent} is {got}, the engines expect {spec}; build the specs with "
                    "weight_specs() of this backend and send them to the engines before every sync"
                )
            dist.broadcast(tensor.contiguous(), src=0, group=group)
            sent += 1
    if group is not None and sent != len(specs):
        raise RuntimeError(f"weight sync sent {sent} tensors but the engines expect {len(specs)}")
    return sent
