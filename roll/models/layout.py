"""Two layouts of one Hugging Face model's weights: the checkpoint's names (what `save_pretrained` writes and
SGLang's loader takes: one tensor per MoE expert) and what a transformers 5 model holds in memory (MoE experts
fused: `experts.gate_up_proj` [E, 2F, H], `experts.down_proj` [E, H, F]).

Trainers hand out the in-memory layout; the engines and the Megatron mapping convert here, so neither needs
the other's package."""

from __future__ import annotations

import re
from collections.abc import Mapping

import torch

_EXPERT = re.compile(r"^(model\.layers\.\d+\.mlp\.experts)\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$")


def to_transformers_layout(state: Mapping[str, torch.Tensor], num_experts: int) -> dict[str, torch.Tensor]:
    """Checkpoint names to the names and layout a transformers 5 model holds in memory (MoE experts fused
    into `gate_up_proj` [E, 2F, H] and `down_proj` [E, H, F], `num_experts` per layer); dense models are
    unchanged."""
    out: dict[str, torch.Tensor] = {}
    experts: dict[str, dict[str, list[torch.Tensor | None]]] = {}
    for name, tensor in state.items():
        match = _EXPERT.match(name)
        if match is None:
            out[name] = tensor
            continue
        prefix, index, kind = match.group(1), int(match.group(2)), match.group(3)
        slots = experts.setdefault(prefix, {k: [None] * num_experts for k in _EXPERT_KINDS})
        slots[kind][index] = tensor
    for prefix, slots in experts.items():
        gate, up, down = (_complete(prefix, kind, slots[kind]) for kind in _EXPERT_KINDS)
        out[prefix + ".gate_up_proj"] = torch.stack(
            [torch.cat([g, u]) for g, u in zip(gate, up, strict=True)]
        )
        out[prefix + ".down_proj"] = torch.stack(down)
    return out


_EXPERT_KINDS = ("gate_proj", "up_proj", "down_proj")


def _complete(prefix: str, kind: str, tensors: list[torch.Tensor | None]) -> list[torch.Tensor]:
    missing = [i for i, t in enumerate(tensors) if t is None]
    if missing:
        raise KeyError(
            f"{prefix}: experts {missing} lack {kind}.weight; pass every expert of a layer together"
        )
    return [t for t in tensors if t is not None]


_FUSED = re.compile(r"^(model\.layers\.\d+\.mlp\.experts)\.(gate_up_proj|down_proj)$")


def to_checkpoint_layout(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Inverse of `to_transformers_layout`: fused in-memory experts back to per-expert checkpoint names
    (what SGLang's weight loader takes); other names are unchanged."""
    out: dict[str, torch.Tensor] = {}
    for name, tensor in state.items():
        match = _FUSED.match(name)
        if match is None:
            out[name] = tensor
            continue
        prefix, kind = match.groups()
        for expert, weight in enumerate(tensor.unbind(0)):
            if kind == "down_proj":
                out[f"{prefix}.{expert}.down_proj.weight"] = weight
            else:
                gate, up = weight.chunk(2)
                out[f"{prefix}.{expert}.gate_proj.weight"] = gate
                out[f"{prefix}.{expert}.up_proj.weight"] = up
    return out
