"""Moving weights between a sharded megatron-core model and Hugging Face names.

- `load_hf_weights`: each rank reads only the checkpoint tensors its shard needs (safetensors, lazily).
- `gather_hf_buckets`: the whole weights in HF checkpoint names, gathered from the tensor/expert/pipeline
  shards, yielded in buckets of about `bucket_bytes` on every rank (what an engine's weight update takes).
- `save_hf_folder`: a Hugging Face model folder from those buckets (config and tokenizer files copied from
  the source folder).

Data parallel (and context parallel) ranks hold identical weights, so only the model-parallel groups talk.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import torch
import torch.distributed as dist
from safetensors import safe_open
from safetensors.torch import save_file

from roll.trainer.megatron.mapping import ModelShape, rules, unmapped_checkpoint_names
from roll.trainer.megatron.sharding import (
    ParallelLayout,
    Placement,
    RankCoords,
    holds,
    join_tensor,
    placement,
    split_rank,
    split_tensor,
)

INDEX_FILE = "model.safetensors.index.json"
DEFAULT_BUCKET_BYTES = 512 * 1024**2
EMBEDDING = "embedding.word_embeddings.weight"


def rank_coords() -> tuple[ParallelLayout, RankCoords]:
    """This rank's place in megatron-core's initialised model-parallel groups."""
    from megatron.core import parallel_state as ps

    layout = ParallelLayout(
        tensor=ps.get_tensor_model_parallel_world_size(),
        pipeline=ps.get_pipeline_model_parallel_world_size(),
        expert=ps.get_expert_model_parallel_world_size(),
        expert_tensor=ps.get_expert_tensor_parallel_world_size(),
    )
    coords = RankCoords(
        tensor=ps.get_tensor_model_parallel_rank(),
        pipeline=ps.get_pipeline_model_parallel_rank(),
        expert=ps.get_expert_model_parallel_rank(),
        expert_tensor=ps.get_expert_tensor_parallel_rank(),
    )
    return layout, coords


def local_parameters(model: torch.nn.Module) -> dict[str, torch.nn.Parameter]:
    """Parameters by local Megatron name (a DDP wrapper's `module.` prefix removed)."""
    inner = getattr(model, "module", model)
    return dict(inner.named_parameters())


class CheckpointReader:
    """Tensors of a HF safetensors folder by name, read one at a time."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        files = sorted(self.folder.glob("*.safetensors"))
        if not files:
            raise FileNotFoundError(
                f"{self.folder} has no *.safetensors files; pass a Hugging Face model folder"
            )
        self.file_of: dict[str, Path] = {}
        for file in files:
            with safe_open(str(file), framework="pt") as handle:
                self.file_of.update(dict.fromkeys(handle.keys(), file))

    def get(self, name: str) -> torch.Tensor:
        file = self.file_of.get(name)
        if file is None:
            raise KeyError(f"{self.folder} has no tensor {name}; is it the model the config describes?")
        with safe_open(str(file), framework="pt") as handle:
            return handle.get_tensor(name)


@torch.no_grad()
def load_hf_weights(model: torch.nn.Module, folder: Path, shape: ModelShape) -> None:
    """Copy this rank's shard of the HF checkpoint in `folder` into `model` (every parameter is set)."""
    layout, coords = rank_coords()
    params = local_parameters(model)
    reader = CheckpointReader(folder)
    unmapped = unmapped_checkpoint_names(set(reader.file_of), shape)
    if unmapped:
        raise ValueError(
            f"{folder} holds tensors the Megatron model has no place for, e.g. {sorted(unmapped)[:3]}; "
            "this model variant is not supported by the megatron backend, use trainer.type: torch"
        )
    loaded: set[str] = set()
    for rule in rules(shape):
        place = placement(rule.megatron, shape, layout)
        targets = [place.local_name] if holds(place, coords) else []
        if rule.megatron == EMBEDDING and shape.tied_embeddings and "output_layer.weight" in params:
            targets.append("output_layer.weight")  # megatron-core's last-stage copy of a tied embedding
        if not targets:
            continue
        whole = rule.to_megatron([reader.get(name) for name in rule.hf], shape)
        piece = split_tensor(whole, place.split, *split_rank(place, coords, layout), shape.vocab_size)
        for target in targets:
            _copy(params, target, piece)
        loaded.update(targets)
    missing = sorted(set(params) - loaded)
    if missing:
        raise RuntimeError(
            f"no checkpoint tensor maps to parameters {missing[:5]}; the mapping is incomplete"
        )


def _copy(params: dict[str, torch.nn.Parameter], name: str, value: torch.Tensor) -> None:
    target = params.get(name)
    if target is None:
        raise RuntimeError(f"the Megatron model has no parameter {name}; the layer spec and mapping disagree")
    if tuple(target.shape) != tuple(value.shape):
        raise RuntimeError(
            f"{name}: checkpoint gives shape {tuple(value.shape)}, model has {tuple(target.shape)}"
        )
    target.data.copy_(value.to(dtype=target.dtype))


def _broadcast(
    tensor: torch.Tensor | None, src_group_rank: int, group: dist.ProcessGroup, like: torch.Tensor
):
    """`tensor` from the group's rank `src_group_rank` on every member (shape sent first)."""
    source = dist.get_global_rank(group, src_group_rank)
    header = torch.zeros(3, dtype=torch.long, device=like.device)
    if dist.get_rank() == source:
        assert tensor is not None
        header[0] = tensor.dim()
        header[1 : 1 + tensor.dim()] = torch.tensor(tensor.shape)
    dist.broadcast(header, source, group=group)
    if dist.get_rank() != source:
        dims = [int(d) for d in header[1 : 1 + int(header[0])]]
        tensor = torch.empty(dims, dtype=like.dtype, device=like.device)
    assert tensor is not None
    tensor = tensor.contiguous()
    dist.broadcast(tensor, source, group=group)
    return tensor


@torch.no_grad()
def _gather_whole(
    place: Placement, params: dict[str, torch.nn.Parameter], shape: ModelShape, like: torch.Tensor
) -> torch.Tensor:
    from megatron.core import parallel_state as ps

    layout, coords = rank_coords()
    whole = None
    if place.stage == coords.pipeline:
        if holds(place, coords):
            local = params[place.local_name].detach()
            size = split_rank(place, coords, layout)[1]
            pieces = [local]
            if size > 1 and place.split != "replicated":
                group = (
                    ps.get_expert_tensor_parallel_group()
                    if place.by_expert_tensor
                    else ps.get_tensor_model_parallel_group()
                )
                pieces = [torch.empty_like(local) for _ in range(size)]
                dist.all_gather(pieces, local.contiguous(), group=group)
            whole = join_tensor(pieces, place.split, shape.vocab_size)
        if place.expert_rank is not None and layout.expert > 1:
            whole = _broadcast(whole, place.expert_rank, ps.get_expert_model_parallel_group(), like)
    if layout.pipeline > 1:
        whole = _broadcast(whole, place.stage, ps.get_pipeline_model_parallel_group(), like)
    assert whole is not None
    return whole


def gather_hf_buckets(
    model: torch.nn.Module, shape: ModelShape, bucket_bytes: int = DEFAULT_BUCKET_BYTES
) -> Iterator[list[tuple[str, torch.Tensor]]]:
    """The whole model in HF checkpoint names, in buckets of about `bucket_bytes`, on every rank.

    Every rank of the model-parallel group must iterate the generator to the end together (it runs
    collectives)."""
    layout, _ = rank_coords()
    params = local_parameters(model)
    like = next(iter(params.values()))
    bucket: list[tuple[str, torch.Tensor]] = []
    size = 0
    for rule in rules(shape):
        whole = _gather_whole(placement(rule.megatron, shape, layout), params, shape, like)
        for name, tensor in zip(rule.hf, rule.to_hf(whole, shape), strict=True):
            bucket.append((name, tensor))
            size += tensor.numel() * tensor.element_size()
        if size >= bucket_bytes:
            yield bucket
            bucket, size = [], 0
    if bucket:
        yield bucket


def save_hf_folder(
    buckets: Iterator[list[tuple[str, torch.Tensor]]], source: Path, directory: Path, write: bool
) -> None:
    """Write the buckets as safetensors shards with an index, and copy config and tokenizer files from the
    source model folder. Every rank must call it (the buckets are gathered collectively); only ranks with
    `write` touch the disk."""
    directory = Path(directory)
    weight_map: dict[str, str] = {}
    total = 0
    dtype = None
    if write:
        directory.mkdir(parents=True, exist_ok=True)
    for index, bucket in enumerate(buckets):
        if not write:
            continue
        file = f"model-{index:05d}.safetensors"
        tensors = {name: tensor.detach().contiguous().cpu() for name, tensor in bucket}
        save_file(tensors, str(directory / file), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(tensors, file))
        total += sum(t.numel() * t.element_size() for t in tensors.values())
        dtype = next(iter(tensors.values())).dtype
    if not write:
        return
    index_data = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (directory / INDEX_FILE).write_text(json.dumps(index_data, indent=2))
    for file in Path(source).iterdir():
        if file.is_file() and not file.name.endswith(".safetensors") and file.name != INDEX_FILE:
            shutil.copy2(file, directory / file.name)
    config_file = directory / "config.json"
    config = json.loads(config_file.read_text())
    config["dtype"] = str(dtype).removeprefix("torch.")
    config_file.write_text(json.dumps(config, indent=2))
