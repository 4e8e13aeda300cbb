"""Split a whole Megatron state dict into one rank's parameters, and join rank pieces back (pure torch).

A rank's names are local: pipeline stage s holds layers [s*L/P, (s+1)*L/P) numbered from 0, expert rank r
holds experts [r*E/EP, (r+1)*E/EP) numbered from 0. Tensor parallel splits follow megatron-core:
vocabulary rows (padded to a multiple of 128 x TP) for the embedding and output layer, rows for `linear_qkv`
(whole query groups per rank), columns for `linear_proj` and `linear_fc2`, and for the SwiGLU `linear_fc1`
the gate rows and the up rows separately (each rank holds [gate_r; up_r]). Experts split by the expert tensor
parallel size instead of the tensor parallel size. Norms and the router are replicated.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

import torch

from roll.trainer.megatron.mapping import ModelShape

VOCAB_MULTIPLE = 128

Split = Literal["replicated", "rows", "columns", "glu", "vocab"]


@dataclass(frozen=True)
class ParallelLayout:
    tensor: int = 1
    pipeline: int = 1
    expert: int = 1
    expert_tensor: int = 1


@dataclass(frozen=True)
class RankCoords:
    tensor: int = 0
    pipeline: int = 0
    expert: int = 0
    expert_tensor: int = 0


def padded_vocab_size(vocab_size: int, tensor_parallel: int) -> int:
    multiple = VOCAB_MULTIPLE * tensor_parallel
    return -(-vocab_size // multiple) * multiple


def all_coords(layout: ParallelLayout) -> Iterator[RankCoords]:
    for p in range(layout.pipeline):
        for t in range(layout.tensor):
            for e in range(layout.expert):
                for et in range(layout.expert_tensor):
                    yield RankCoords(tensor=t, pipeline=p, expert=e, expert_tensor=et)


_LAYER = re.compile(r"^decoder\.layers\.(\d+)\.(.*)$")
_EXPERT = re.compile(r"^mlp\.experts\.local_experts\.(\d+)\.(.*)$")


@dataclass(frozen=True)
class Placement:
    """Where a whole parameter lives: pipeline stage, expert rank (None: all), split and local name."""

    stage: int
    expert_rank: int | None
    split: Split
    by_expert_tensor: bool
    local_name: str


def placement(name: str, shape: ModelShape, layout: ParallelLayout) -> Placement:
    """Placement of the whole-model parameter `name`."""
    last = layout.pipeline - 1
    if name == "embedding.word_embeddings.weight":
        return Placement(0, None, "vocab", False, name)
    if name == "output_layer.weight":
        return Placement(last, None, "vocab", False, name)
    match = _LAYER.match(name)
    if match is None:
        return Placement(last, None, "replicated", False, name)
    per_stage = shape.num_layers // layout.pipeline
    index, rest = int(match.group(1)), match.group(2)
    stage = index // per_stage
    local_layer = f"decoder.layers.{index - stage * per_stage}."
    expert = _EXPERT.match(rest)
    if expert is not None:
        per_rank = shape.num_experts // layout.expert
        global_expert, tail = int(expert.group(1)), expert.group(2)
        rank = global_expert // per_rank
        local = f"{local_layer}mlp.experts.local_experts.{global_expert - rank * per_rank}.{tail}"
        return Placement(stage, rank, _split_of(tail), True, local)
    return Placement(stage, None, _split_of(rest), False, local_layer + rest)


def _split_of(rest: str) -> Split:
    if rest.startswith("self_attention.linear_qkv."):
        return "rows"
    if rest.endswith(("linear_proj.weight", "linear_fc2.weight")):
        return "columns"
    if rest.endswith("linear_fc1.weight"):
        return "glu"
    return "replicated"


def split_tensor(tensor: torch.Tensor, split: Split, rank: int, size: int, vocab_size: int) -> torch.Tensor:
    """Rank `rank`'s piece of a whole tensor."""
    if split == "replicated":
        return tensor
    if split == "columns":
        return tensor.chunk(size, dim=1)[rank]
    if split == "glu":
        gate, up = tensor.chunk(2)
        return torch.cat([gate.chunk(size)[rank], up.chunk(size)[rank]])
    if split == "vocab":
        padded = padded_vocab_size(vocab_size, size)
        tensor = torch.cat([tensor, tensor.new_zeros(padded - tensor.shape[0], *tensor.shape[1:])])
    return tensor.chunk(size)[rank]


def join_tensor(pieces: list[torch.Tensor], split: Split, vocab_size: int) -> torch.Tensor:
    """The whole tensor from every rank's piece, in rank order (inverse of `split_tensor`)."""
    if split == "replicated":
        return pieces[0]
    if split == "columns":
        return torch.cat(pieces, dim=1)
    if split == "glu":
        halves = [piece.chunk(2) for piece in pieces]
        return torch.cat([torch.cat([h[0] for h in halves]), torch.cat([h[1] for h in halves])])
    joined = torch.cat(pieces)
    return joined[:vocab_size] if split == "vocab" else joined


def split_rank(place: Placement, coords: RankCoords, layout: ParallelLayout) -> tuple[int, int]:
    """(rank, size) along which this parameter is split: expert tensor parallel for experts, else tensor."""
    if place.by_expert_tensor:
        return coords.expert_tensor, layout.expert_tensor
    return coords.tensor, layout.tensor


def holds(place: Placement, coords: RankCoords) -> bool:
    on_stage = place.stage == coords.pipeline
    return on_stage and (place.expert_rank is None or place.expert_rank == coords.expert)


def shard(
    state: Mapping[str, torch.Tensor], shape: ModelShape, layout: ParallelLayout, coords: RankCoords
) -> dict[str, torch.Tensor]:
    """The parameters rank `coords` holds, under their local names."""
    out: dict[str, torch.Tensor] = {}
    for name, tensor in state.items():
        place = placement(name, shape, layout)
        if holds(place, coords):
            rank, size = split_rank(place, coords, layout)
            out[place.local_name] = split_tensor(tensor, place.split, rank, size, shape.vocab_size)
    if shape.tied_embeddings and layout.pipeline > 1 and coords.pipeline == layout.pipeline - 1:
        # megatron-core keeps a copy of the tied embedding as the last stage's output layer.
        embedding = state["embedding.word_embeddings.weight"]
        out["output_layer.weight"] = split_tensor(
            embedding, "vocab", coords.tensor, layout.tensor, shape.vocab_size
        )
    return out


def unshard(
    pieces: Mapping[RankCoords, Mapping[str, torch.Tensor]],
    shape: ModelShape,
    layout: ParallelLayout,
    names: set[str],
) -> dict[str, torch.Tensor]:
    """The whole state dict (`names`) from every rank's parameters."""
    out: dict[str, torch.Tensor] = {}
    for name in sorted(names):
        place = placement(name, shape, layout)
        owners = [c for c in all_coords(layout) if holds(place, c)]
        by_rank: dict[int, torch.Tensor] = {}
        for coords in owners:
            rank, _ = split_rank(place, coords, layout)
            by_rank.setdefault(rank, pieces[coords][place.local_name])
        out[name] = join_tensor([by_rank[r] for r in sorted(by_rank)], place.split, shape.vocab_size)
    return out
