"""A megatron-core GPT model built from a Hugging Face config (llama, qwen2, qwen3, qwen3_moe).

The layer spec is megatron-core's local one (no Transformer Engine, no Apex), so the model runs wherever
PyTorch does with megatron-core installed: RMSNorm, SwiGLU, RoPE, optional QK-norm and QKV bias, and for
MoE models a top-k softmax router over per-expert MLPs (SequentialMLP). Two modules of the spec are ours:
the norm (`RMSNorm`, which also works under sequence parallelism) and the core attention
(`attention.PackedSequenceAttention`, per-sequence attention over packed rows). Under context parallelism
the core attention is Transformer Engine's (`TEDotProductAttention`, the only one in megatron-core that
splits sequences over ranks) and the rest of the spec stays local: the core attention holds no weights,
so names, shapes and the whole weight path are the same for every context parallel size.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from roll.trainer.megatron.config import MegatronBackendConfig, require_transformer_engine
from roll.trainer.megatron.mapping import ModelShape, num_experts
from roll.trainer.megatron.sharding import padded_vocab_size

if TYPE_CHECKING:
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.transformer.transformer_config import TransformerConfig

# megatron-core implements Llama 3 RoPE scaling with these values fixed; other values would silently differ.
_LLAMA3_FIXED = {"low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}


# megatron-core's norm fallbacks (torch's without Apex, Apex's FusedLayerNorm with it), replaced by `RMSNorm`.
_MEGATRON_NORMS = ("WrappedTorchNorm", "FusedLayerNorm")


class RMSNorm(torch.nn.RMSNorm):
    """torch RMSNorm in the model's parameter dtype that also works under sequence parallelism.

    megatron-core's torch fallback refuses sequence parallelism (and is built in float32 whatever the model's
    dtype). Under sequence parallelism every tensor parallel rank normalises a different slice of the
    sequence, so the weight's gradient must be summed over those ranks: megatron-core does that for weights
    marked `sequence_parallel`, as Apex's and Transformer Engine's norms mark theirs.
    """

    def __init__(self, config: TransformerConfig, hidden_size: int, eps: float = 1e-6) -> None:
        super().__init__(hidden_size, eps=eps, dtype=config.params_dtype)
        self.weight.sequence_parallel = config.sequence_parallel


def _core_attention(context_parallel_size: int) -> type:
    """`PackedSequenceAttention`, or Transformer Engine's attention under context parallelism."""
    if context_parallel_size == 1:
        from roll.trainer.megatron.attention import PackedSequenceAttention

        return PackedSequenceAttention
    require_transformer_engine(context_parallel_size)
    from megatron.core.extensions.transformer_engine import TEDotProductAttention

    return TEDotProductAttention


def _with_our_modules(spec: Any, core_attention: type) -> Any:
    """A copy of a layer spec tree with megatron-core's norms replaced by `RMSNorm` and its local core
    attention by `core_attention`."""
    from megatron.core.transformer.dot_product_attention import DotProductAttention

    if isinstance(spec, type):
        if spec.__name__ in _MEGATRON_NORMS:
            return RMSNorm
        return core_attention if spec is DotProductAttention else spec
    if isinstance(spec, list):
        return [_with_our_modules(item, core_attention) for item in spec]
    if dataclasses.is_dataclass(spec):
        fields = {
            f.name: _with_our_modules(getattr(spec, f.name), core_attention)
            for f in dataclasses.fields(spec)
            if f.init
        }
        return dataclasses.replace(spec, **fields)
    return spec


def patch_megatron_without_transformer_engine() -> None:
    """megatron-core 0.16 reads `te_general_gemm` in its MoE router even when Transformer Engine is absent and
    the name was never bound (NameError); bind it to None, which is the library's own "no TE" value."""
    from megatron.core.transformer.moe import moe_utils

    if not hasattr(moe_utils, "te_general_gemm"):
        moe_utils.te_general_gemm = None


def rope_settings(hf: dict[str, Any]) -> dict[str, Any]:
    """GPTModel RoPE arguments from a HF config (transformers 5 `rope_parameters` or older `rope_theta`)."""
    params = dict(hf.get("rope_parameters") or hf.get("rope_scaling") or {})
    theta = float(params.get("rope_theta") or hf.get("rope_theta") or 10000.0)
    rope_type = params.get("rope_type") or params.get("type") or "default"
    if rope_type == "default":
        return {"rotary_base": theta}
    if rope_type == "llama3":
        differing = {k: params.get(k) for k, v in _LLAMA3_FIXED.items() if float(params.get(k, v)) != v}
        if not differing:
            return {
                "rotary_base": theta,
                "rope_scaling": True,
                "rope_scaling_factor": float(params["factor"]),
            }
        raise ValueError(
            f"llama3 RoPE scaling with {differing} is not what megatron-core implements ({_LLAMA3_FIXED}); "
            "use trainer.type: torch for this model"
        )
    raise ValueError(
        f"RoPE type {rope_type!r} is not supported by the megatron backend (supported: default, llama3); "
        "use trainer.type: torch for this model"
    )


def transformer_config(hf: dict[str, Any], config: MegatronBackendConfig) -> TransformerConfig:
    """megatron-core TransformerConfig for the HF config dict under the backend's parallel layout."""
    from megatron.core.transformer.transformer_config import TransformerConfig

    shape = ModelShape.from_hf(hf)
    if hf.get("use_sliding_window"):
        raise ValueError(
            "sliding-window attention is not supported by the megatron backend; use trainer.type: torch"
        )
    if hf.get("hidden_act", "silu") != "silu":
        raise ValueError(f"hidden_act {hf['hidden_act']!r} is not SwiGLU's silu; use trainer.type: torch")
    bf16 = config.dtype == "bfloat16"
    dtype = torch.bfloat16 if bf16 else torch.float32
    moe: dict[str, Any] = {}
    if shape.num_experts:
        moe = {
            "num_moe_experts": num_experts(hf),
            "moe_layer_freq": [int(is_moe) for is_moe in shape.moe_layers],
            "moe_ffn_hidden_size": int(hf["moe_intermediate_size"]),
            "moe_router_topk": int(hf["num_experts_per_tok"]),
            # Softmax over the top-k logits equals HF's softmax over all experts renormalised over the top k.
            "moe_router_pre_softmax": not hf.get("norm_topk_prob", True),
            "moe_router_load_balancing_type": "aux_loss" if config.moe_aux_loss_coeff > 0 else "none",
            "moe_aux_loss_coeff": config.moe_aux_loss_coeff,
            "moe_token_dispatcher_type": config.moe_token_dispatcher,
            "moe_grouped_gemm": False,
            "moe_router_dtype": "fp32",
        }
    recompute: dict[str, Any] = {}
    if config.activation_recompute == "selective":
        recompute = {"recompute_granularity": "selective"}
    elif config.activation_recompute == "full":
        recompute = {
            "recompute_granularity": "full",
            "recompute_method": "uniform",
            "recompute_num_layers": 1,
        }
    return TransformerConfig(
        num_layers=shape.num_layers,
        hidden_size=shape.hidden_size,
        num_attention_heads=shape.num_heads,
        num_query_groups=shape.num_groups,
        kv_channels=shape.head_dim,
        ffn_hidden_size=int(hf["intermediate_size"]),
        normalization="RMSNorm",
        layernorm_epsilon=float(hf.get("rms_norm_eps", 1e-6)),
        gated_linear_unit=True,
        activation_func=F.silu,
        add_bias_linear=False,
        add_qkv_bias=shape.qkv_bias,
        qk_layernorm=shape.qk_norm,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        tensor_model_parallel_size=config.tensor_parallel_size,
        pipeline_model_parallel_size=config.pipeline_parallel_size,
        expert_model_parallel_size=config.expert_parallel_size,
        expert_tensor_parallel_size=config.expert_tensor_parallel_size,
        context_parallel_size=config.context_parallel_size,
        # Transformer Engine's ring exchange of keys and values: its only CP mode for THD (packed) rows.
        cp_comm_type="p2p" if config.context_parallel_size > 1 else None,
        sequence_parallel=config.sequence_parallel,
        bf16=bf16,
        params_dtype=dtype,
        pipeline_dtype=dtype,
        # The weights come from the HF checkpoint: skip random initialisation.
        perform_initialization=False,
        use_cpu_initialization=True,
        # Fused kernels need Transformer Engine or Apex, which the local spec does without.
        masked_softmax_fusion=False,
        bias_activation_fusion=False,
        bias_dropout_fusion=False,
        apply_rope_fusion=False,
        gradient_accumulation_fusion=False,
        persist_layer_norm=False,
        attention_softmax_in_fp32=True,
        **moe,
        **recompute,
    )


def build_gpt_model(hf: dict[str, Any], config: MegatronBackendConfig) -> GPTModel:
    """This rank's GPT model (its pipeline stage, tensor/expert shard); weights are left for the loader.

    Needs `megatron.core.parallel_state.initialize_model_parallel` to have run.
    """
    from megatron.core import parallel_state
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_block_spec
    from megatron.core.models.gpt.gpt_model import GPTModel

    patch_megatron_without_transformer_engine()
    shape = ModelShape.from_hf(hf)
    tf_config = transformer_config(hf, config)
    spec = _with_our_modules(
        get_gpt_decoder_block_spec(tf_config, use_transformer_engine=False, normalization="RMSNorm"),
        _core_attention(config.context_parallel_size),
    )
    return GPTModel(
        config=tf_config,
        transformer_layer_spec=spec,
        vocab_size=padded_vocab_size(shape.vocab_size, config.tensor_parallel_size),
        max_sequence_length=int(hf.get("max_position_embeddings", 4096)),
        pre_process=parallel_state.is_pipeline_first_stage(),
        post_process=parallel_state.is_pipeline_last_stage(),
        parallel_output=True,  # logits stay split by vocabulary; see forward.token_logprobs
        share_embeddings_and_output_weights=shape.tied_embeddings,
        position_embedding_type="rope",
        **rope_settings(hf),
    )
