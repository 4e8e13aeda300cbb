"""Weight names and layouts between Hugging Face checkpoints and megatron-core's GPT model (local layer spec).

Both directions work on whole (unsharded) state dicts with global layer and expert numbers; `sharding` splits
the Megatron side by rank. Layouts that differ:

- attention: HF q/k/v projections become one `linear_qkv` whose rows are grouped by key/value head: for each
  query group, its query heads, then its key head, then its value head (biases likewise, for qwen2);
- MLP: HF gate and up projections become one `linear_fc1` (gate rows first), per expert for MoE layers;
- the MoE router `mlp.gate` becomes `mlp.router`; experts become `mlp.experts.local_experts.<e>`.

HF names here are the checkpoint names (what `save_pretrained` writes and SGLang loads). transformers 5 holds
MoE experts fused in memory (`experts.gate_up_proj` [E, 2F, H], `experts.down_proj` [E, H, F]);
`to_transformers_layout` converts to that.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from roll.trainer.megatron.config import SUPPORTED_MODEL_TYPES


@dataclass(frozen=True)
class ModelShape:
    """What the mapping needs to know about a model, read from its Hugging Face config."""

    model_type: str
    num_layers: int
    hidden_size: int
    num_heads: int
    num_groups: int
    head_dim: int
    vocab_size: int
    tied_embeddings: bool
    qkv_bias: bool
    qk_norm: bool
    num_experts: int  # 0 for dense models
    moe_layers: tuple[bool, ...]  # per layer: MoE block (True) or dense MLP

    @classmethod
    def from_hf(cls, hf: Mapping[str, Any]) -> ModelShape:
        """From a `config.json` dict (or `PretrainedConfig.to_dict()`)."""
        model_type = hf["model_type"]
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise ValueError(
                f"model_type {model_type!r} has no Megatron mapping (supported: "
                f"{', '.join(SUPPORTED_MODEL_TYPES)}); use trainer.type: torch for this model"
            )
        layers = int(hf["num_hidden_layers"])
        heads = int(hf["num_attention_heads"])
        experts = num_experts(hf) if model_type == "qwen3_moe" else 0
        dense_only = set(hf.get("mlp_only_layers") or [])
        step = int(hf.get("decoder_sparse_step") or 1)
        moe_layers = tuple(experts > 0 and i not in dense_only and (i + 1) % step == 0 for i in range(layers))
        return cls(
            model_type=model_type,
            num_layers=layers,
            hidden_size=int(hf["hidden_size"]),
            num_heads=heads,
            num_groups=int(hf.get("num_key_value_heads") or heads),
            head_dim=int(hf.get("head_dim") or int(hf["hidden_size"]) // heads),
            vocab_size=int(hf["vocab_size"]),
            tied_embeddings=bool(hf.get("tie_word_embeddings", False)),
            qkv_bias=model_type == "qwen2" or bool(hf.get("attention_bias", False)),
            qk_norm=model_type in ("qwen3", "qwen3_moe"),
            num_experts=experts,
            moe_layers=moe_layers,
        )

    @property
    def heads_per_group(self) -> int:
        return self.num_heads // self.num_groups


def num_experts(hf: Mapping[str, Any]) -> int:
    """Routed experts of a HF config (transformers 5 writes num_local_experts, older files num_experts)."""
    return int(hf.get("num_experts") or hf.get("num_local_experts") or 0)


def fuse_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, shape: ModelShape) -> torch.Tensor:
    """[q; k; v] rows regrouped per query group (works for weights [rows, H] and biases [rows])."""
    rest = q.shape[1:]
    d, g = shape.head_dim, shape.num_groups
    q = q.reshape(g, shape.heads_per_group * d, *rest)
    k = k.reshape(g, d, *rest)
    v = v.reshape(g, d, *rest)
    return torch.cat([q, k, v], dim=1).reshape(-1, *rest)


def split_qkv(qkv: torch.Tensor, shape: ModelShape) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Inverse of `fuse_qkv`."""
    rest = qkv.shape[1:]
    d, g, per = shape.head_dim, shape.num_groups, shape.heads_per_group
    grouped = qkv.reshape(g, (per + 2) * d, *rest)
    q, k, v = grouped.split([per * d, d, d], dim=1)
    return q.reshape(-1, *rest), k.reshape(-1, *rest), v.reshape(-1, *rest)


def _layer_pairs(shape: ModelShape, i: int) -> list[tuple[str, str]]:
    """(HF name, Megatron name) of one layer's tensors that map one to one."""
    hf, mc = f"model.layers.{i}.", f"decoder.layers.{i}."
    pairs = [
        (hf + "input_layernorm.weight", mc + "input_layernorm.weight"),
        (hf + "post_attention_layernorm.weight", mc + "pre_mlp_layernorm.weight"),
        (hf + "self_attn.o_proj.weight", mc + "self_attention.linear_proj.weight"),
    ]
    if shape.qk_norm:
        pairs += [
            (hf + "self_attn.q_norm.weight", mc + "self_attention.q_layernorm.weight"),
            (hf + "self_attn.k_norm.weight", mc + "self_attention.k_layernorm.weight"),
        ]
    if shape.moe_layers[i]:
        pairs.append((hf + "mlp.gate.weight", mc + "mlp.router.weight"))
        pairs += [
            (
                hf + f"mlp.experts.{e}.down_proj.weight",
                mc + f"mlp.experts.local_experts.{e}.linear_fc2.weight",
            )
            for e in range(shape.num_experts)
        ]
    else:
        pairs.append((hf + "mlp.down_proj.weight", mc + "mlp.linear_fc2.weight"))
    return pairs


def _glu_pairs(shape: ModelShape, i: int) -> list[tuple[str, str]]:
    """(HF prefix holding gate_proj/up_proj, Megatron linear_fc1 name) of one layer."""
    hf, mc = f"model.layers.{i}.mlp.", f"decoder.layers.{i}.mlp."
    if shape.moe_layers[i]:
        return [
            (hf + f"experts.{e}.", mc + f"experts.local_experts.{e}.linear_fc1.weight")
            for e in range(shape.num_experts)
        ]
    return [(hf, mc + "linear_fc1.weight")]


def _top_pairs(shape: ModelShape) -> list[tuple[str, str]]:
    pairs = [
        ("model.embed_tokens.weight", "embedding.word_embeddings.weight"),
        ("model.norm.weight", "decoder.final_layernorm.weight"),
    ]
    if not shape.tied_embeddings:
        pairs.append(("lm_head.weight", "output_layer.weight"))
    return pairs


def _take(state: Mapping[str, torch.Tensor], name: str) -> torch.Tensor:
    if name not in state:
        raise KeyError(f"weight {name} is missing; the state dict does not fit the model config it came with")
    return state[name]


def hf_to_megatron(state: Mapping[str, torch.Tensor], shape: ModelShape) -> dict[str, torch.Tensor]:
    """Whole Megatron state dict from a whole HF checkpoint state dict."""
    out = {mc: _take(state, hf) for hf, mc in _top_pairs(shape)}
    for i in range(shape.num_layers):
        out.update({mc: _take(state, hf) for hf, mc in _layer_pairs(shape, i)})
        attn = f"model.layers.{i}.self_attn."
        qkv = f"decoder.layers.{i}.self_attention.linear_qkv."
        kinds = ["weight", "bias"] if shape.qkv_bias else ["weight"]
        for kind in kinds:
            parts = [_take(state, f"{attn}{p}_proj.{kind}") for p in "qkv"]
            out[qkv + kind] = fuse_qkv(*parts, shape)
        for hf, mc in _glu_pairs(shape, i):
            out[mc] = torch.cat([_take(state, hf + "gate_proj.weight"), _take(state, hf + "up_proj.weight")])
    expected = megatron_names(shape)
    if set(out) != expected:
        raise AssertionError(f"mapping produced unexpected names: {sorted(set(out) ^ expected)[:5]}")
    return out


def megatron_to_hf(state: Mapping[str, torch.Tensor], shape: ModelShape) -> dict[str, torch.Tensor]:
    """Whole HF checkpoint state dict from a whole Megatron state dict (inverse of `hf_to_megatron`)."""
    out = {hf: _take(state, mc) for hf, mc in _top_pairs(shape)}
    for i in range(shape.num_layers):
        out.update({hf: _take(state, mc) for hf, mc in _layer_pairs(shape, i)})
        attn = f"model.layers.{i}.self_attn."
        qkv = f"decoder.layers.{i}.self_attention.linear_qkv."
        kinds = ["weight", "bias"] if shape.qkv_bias else ["weight"]
        for kind in kinds:
            for p, part in zip("qkv", split_qkv(_take(state, qkv + kind), shape), strict=True):
                out[f"{attn}{p}_proj.{kind}"] = part
        for hf, mc in _glu_pairs(shape, i):
            gate, up = _take(state, mc).chunk(2)
            out[hf + "gate_proj.weight"], out[hf + "up_proj.weight"] = gate, up
    return out


def megatron_names(shape: ModelShape) -> set[str]:
    """Every parameter name of the whole Megatron model (global layer and expert numbers)."""
    names = {mc for _, mc in _top_pairs(shape)}
    for i in range(shape.num_layers):
        names.update(mc for _, mc in _layer_pairs(shape, i))
        names.update(mc for _, mc in _glu_pairs(shape, i))
        qkv = f"decoder.layers.{i}.self_attention.linear_qkv."
        names.update([qkv + "weight", qkv + "bias"] if shape.qkv_bias else [qkv + "weight"])
    return names


_EXPERT = re.compile(r"^(model\.layers\.\d+\.mlp\.experts)\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$")


def to_transformers_layout(state: Mapping[str, torch.Tensor], shape: ModelShape) -> dict[str, torch.Tensor]:
    """Checkpoint names to the names and layout a transformers 5 model holds in memory (MoE experts fused
    into `gate_up_proj` [E, 2F, H] and `down_proj` [E, H, F]); dense models are unchanged."""
    out: dict[str, torch.Tensor] = {}
    experts: dict[str, dict[str, list[torch.Tensor | None]]] = {}
    for name, tensor in state.items():
        match = _EXPERT.match(name)
        if match is None:
            out[name] = tensor
            continue
        prefix, index, kind = match.group(1), int(match.group(2)), match.group(3)
        slots = experts.setdefault(prefix, {k: [None] * shape.num_experts for k in _EXPERT_KINDS})
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
