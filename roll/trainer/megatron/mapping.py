"""Weight names and layouts between Hugging Face checkpoints and megatron-core's GPT model (local layer spec).

Both directions work on whole (unsharded) state dicts with global layer and expert numbers; `sharding` splits
the Megatron side by rank. Layouts that differ:

- attention: HF q/k/v projections become one `linear_qkv` whose rows are grouped by key/value head: for each
  query group, its query heads, then its key head, then its value head (biases likewise, for qwen2);
- MLP: HF gate and up projections become one `linear_fc1` (gate rows first), per expert for MoE layers;
- the MoE router `mlp.gate` becomes `mlp.router`; experts become `mlp.experts.local_experts.<e>`.

HF names here are the checkpoint names (what `save_pretrained` writes and SGLang loads); the conversion to
transformers' in-memory layout (fused MoE experts) is `roll.models.layout`, shared with the engines.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

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
        # qwen2's q/k/v biases are its architecture; other biases have no place in the Megatron model.
        extra_bias = [k for k in ("attention_bias", "mlp_bias") if hf.get(k) and model_type != "qwen2"]
        if extra_bias:
            raise ValueError(
                f"{model_type} with {' and '.join(extra_bias)} is not supported by the megatron backend "
                "(its layers have no such biases); use trainer.type: torch for this model"
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
            qkv_bias=model_type == "qwen2",
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


@dataclass(frozen=True)
class Rule:
    """One Megatron parameter and the HF tensors it is made of: `same` (one tensor, same layout), `qkv`
    (q, k, v fused per query group) or `glu` (gate and up stacked)."""

    megatron: str
    hf: tuple[str, ...]
    kind: Literal["same", "qkv", "glu"]

    def to_megatron(self, tensors: list[torch.Tensor], shape: ModelShape) -> torch.Tensor:
        if self.kind == "qkv":
            return fuse_qkv(*tensors, shape)
        if self.kind == "glu":
            return torch.cat(tensors)
        return tensors[0]

    def to_hf(self, tensor: torch.Tensor, shape: ModelShape) -> list[torch.Tensor]:
        if self.kind == "qkv":
            return list(split_qkv(tensor, shape))
        if self.kind == "glu":
            return list(tensor.chunk(2))
        return [tensor]


def rules(shape: ModelShape) -> list[Rule]:
    """Every Megatron parameter of the whole model (global layer and expert numbers), in model order."""
    out = [Rule("embedding.word_embeddings.weight", ("model.embed_tokens.weight",), "same")]
    for i in range(shape.num_layers):
        out += _layer_rules(shape, i)
    out.append(Rule("decoder.final_layernorm.weight", ("model.norm.weight",), "same"))
    if not shape.tied_embeddings:
        out.append(Rule("output_layer.weight", ("lm_head.weight",), "same"))
    return out


def _layer_rules(shape: ModelShape, i: int) -> list[Rule]:
    hf, mc = f"model.layers.{i}.", f"decoder.layers.{i}."
    attn, mc_attn = hf + "self_attn.", mc + "self_attention."
    out = [Rule(mc + "input_layernorm.weight", (hf + "input_layernorm.weight",), "same")]
    for kind in ("weight", "bias") if shape.qkv_bias else ("weight",):
        sources = tuple(f"{attn}{p}_proj.{kind}" for p in "qkv")
        out.append(Rule(f"{mc_attn}linear_qkv.{kind}", sources, "qkv"))
    if shape.qk_norm:
        out.append(Rule(mc_attn + "q_layernorm.weight", (attn + "q_norm.weight",), "same"))
        out.append(Rule(mc_attn + "k_layernorm.weight", (attn + "k_norm.weight",), "same"))
    out.append(Rule(mc_attn + "linear_proj.weight", (attn + "o_proj.weight",), "same"))
    out.append(Rule(mc + "pre_mlp_layernorm.weight", (hf + "post_attention_layernorm.weight",), "same"))
    if shape.moe_layers[i]:
        out.append(Rule(mc + "mlp.router.weight", (hf + "mlp.gate.weight",), "same"))
        mlps = [
            (f"{hf}mlp.experts.{e}.", f"{mc}mlp.experts.local_experts.{e}.") for e in range(shape.num_experts)
        ]
    else:
        mlps = [(hf + "mlp.", mc + "mlp.")]
    for hf_mlp, mc_mlp in mlps:
        glu = (hf_mlp + "gate_proj.weight", hf_mlp + "up_proj.weight")
        out.append(Rule(mc_mlp + "linear_fc1.weight", glu, "glu"))
        out.append(Rule(mc_mlp + "linear_fc2.weight", (hf_mlp + "down_proj.weight",), "same"))
    return out


def _take(state: Mapping[str, torch.Tensor], name: str) -> torch.Tensor:
    if name not in state:
        raise KeyError(f"weight {name} is missing; the state dict does not fit the model config it came with")
    return state[name]


def hf_to_megatron(state: Mapping[str, torch.Tensor], shape: ModelShape) -> dict[str, torch.Tensor]:
    """Whole Megatron state dict from a whole HF checkpoint state dict."""
    return {
        rule.megatron: rule.to_megatron([_take(state, name) for name in rule.hf], shape)
        for rule in rules(shape)
    }


def megatron_to_hf(state: Mapping[str, torch.Tensor], shape: ModelShape) -> dict[str, torch.Tensor]:
    """Whole HF checkpoint state dict from a whole Megatron state dict (inverse of `hf_to_megatron`)."""
    out: dict[str, torch.Tensor] = {}
    for rule in rules(shape):
        out.update(zip(rule.hf, rule.to_hf(_take(state, rule.megatron), shape), strict=True))
    return out


def unmapped_checkpoint_names(names: set[str], shape: ModelShape) -> set[str]:
    """Checkpoint tensors no rule reads (a tied model's lm_head copy and RoPE caches are expected)."""
    used = {name for rule in rules(shape) for name in rule.hf}
    ignored = {"lm_head.weight"} if shape.tied_embeddings else set()
    return {n for n in names - used - ignored if not n.endswith("rotary_emb.inv_freq")}


def megatron_names(shape: ModelShape) -> set[str]:
    """Every parameter name of the whole Megatron model (global layer and expert numbers)."""
    return {rule.megatron for rule in rules(shape)}
