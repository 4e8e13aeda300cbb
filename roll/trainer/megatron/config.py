"""Config of the Megatron-core train backend (importable without torch or megatron-core).

`MegatronBackendConfig` checks what it can alone (sizes positive, sequence parallel needs tensor parallel);
`check_against_model` checks the parallel layout against a Hugging Face `config.json`, the world size and
the installed packages (context parallelism needs Transformer Engine), before any GPU work starts. The
package check is not a config-time rule, so a config file validates on a machine without the GPU stack.
"""

from __future__ import annotations

import importlib.util
from typing import Any, Literal

from pydantic import Field, model_validator

from roll.config import StrictConfig
from roll.trainer.config import OptimizerConfig, ScheduleConfig

SUPPORTED_MODEL_TYPES = ("llama", "qwen2", "qwen3", "qwen3_moe")


class MegatronBackendConfig(StrictConfig):
    """The scale train backend: megatron-core GPT model with tensor/pipeline/expert/context parallelism."""

    type: Literal["megatron"] = Field("megatron", description="Train backend: megatron (megatron-core).")
    model: str = Field(
        "builtin:tiny-qwen3-moe",
        description="Model id: a builtin:* name or a Hugging Face folder (llama, qwen2, qwen3, qwen3_moe).",
    )
    tensor_parallel_size: int = Field(1, ge=1, description="Tensor parallel ranks (attention heads split).")
    pipeline_parallel_size: int = Field(1, ge=1, description="Pipeline stages (layers split).")
    expert_parallel_size: int = Field(1, ge=1, description="Expert parallel ranks (MoE models only).")
    expert_tensor_parallel_size: int = Field(
        1, ge=1, description="Tensor parallel ranks inside each expert (MoE models only)."
    )
    context_parallel_size: int = Field(
        1,
        ge=1,
        description="Context parallel ranks: every sequence split over them (long contexts); above 1 needs "
        "Transformer Engine installed and dtype bfloat16.",
    )
    sequence_parallel: bool = Field(
        False, description="Split norms and dropout along the sequence across tensor parallel ranks."
    )
    micro_batch_tokens: int = Field(
        4096, ge=1, description="Token budget of a micro-batch (whole trajectories; a longer one runs alone)."
    )
    dtype: Literal["bfloat16", "float32"] = Field(
        "bfloat16", description="Parameter and compute dtype; the optimizer keeps float32 master weights."
    )
    distributed_optimizer: bool = Field(
        True, description="Shard optimizer state over data parallel ranks (ZeRO-1)."
    )
    activation_recompute: Literal["none", "selective", "full"] = Field(
        "none", description="Recompute activations in backward: selective (attention core) or full layers."
    )
    moe_aux_loss_coeff: float = Field(
        0.0, ge=0.0, description="Weight of the router load-balancing loss (MoE models)."
    )
    moe_token_dispatcher: Literal["alltoall", "allgather"] = Field(
        "alltoall", description="How MoE tokens reach their experts' ranks (megatron-core's dispatcher type)."
    )
    compute_entropy: bool = Field(True, description="Report the policy entropy of trained tokens.")
    seed: int = Field(0, description="Seed of megatron-core's and torch's generators.")
    optimizer: OptimizerConfig = Field(default_factory=OptimizerConfig, description="AdamW and clipping.")
    schedule: ScheduleConfig = Field(default_factory=ScheduleConfig, description="The LR schedule.")

    @model_validator(mode="after")
    def _parallel_layout(self) -> MegatronBackendConfig:
        if self.context_parallel_size > 1 and self.dtype != "bfloat16":
            raise ValueError(
                "context_parallel_size > 1 needs dtype: bfloat16 (Transformer Engine's context parallel "
                "attention runs only in its 16-bit flash/fused kernels); set dtype: bfloat16 or "
                "context_parallel_size: 1"
            )
        if self.sequence_parallel and self.tensor_parallel_size == 1:
            raise ValueError(
                "sequence_parallel needs tensor_parallel_size > 1; set sequence_parallel: false "
                "or raise tensor_parallel_size"
            )
        if self.expert_parallel_size > 1 and self.tensor_parallel_size > 1 and not self.sequence_parallel:
            raise ValueError(
                "expert_parallel_size > 1 with tensor_parallel_size > 1 needs sequence_parallel: true "
                "(megatron-core's MoE token dispatch requires it)"
            )
        return self

    @property
    def model_parallel_size(self) -> int:
        """Ranks holding one copy of the dense weights (tensor x pipeline x context)."""
        return self.tensor_parallel_size * self.pipeline_parallel_size * self.context_parallel_size


class ModelLayoutError(ValueError):
    """The parallel layout does not fit the model or the world size; the message names the key to change."""


def check_against_model(config: MegatronBackendConfig, hf_config: dict[str, Any], world_size: int) -> None:
    """Raise `ModelLayoutError` if the layout cannot split this model (`config.json` as a dict) over
    `world_size` ranks."""
    require_transformer_engine(config.context_parallel_size)
    model_type = hf_config.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ModelLayoutError(
            f"trainer.model: model_type {model_type!r} is not supported by the megatron backend "
            f"(allowed: {', '.join(SUPPORTED_MODEL_TYPES)}); use trainer.type: torch for other models"
        )
    tp, pp = config.tensor_parallel_size, config.pipeline_parallel_size
    heads = int(hf_config["num_attention_heads"])
    groups = int(hf_config.get("num_key_value_heads") or heads)
    layers = int(hf_config["num_hidden_layers"])
    _divides("trainer.tensor_parallel_size", tp, "num_key_value_heads", groups)
    _divides("trainer.tensor_parallel_size", tp, "num_attention_heads", heads)
    _divides("trainer.pipeline_parallel_size", pp, "num_hidden_layers", layers)
    if world_size % config.model_parallel_size:
        raise ModelLayoutError(
            f"world size {world_size} is not a multiple of tensor_parallel_size x pipeline_parallel_size x "
            f"context_parallel_size = {config.model_parallel_size}; change those sizes or the number of GPUs"
        )
    # transformers 5 writes num_local_experts, older config files num_experts
    experts = hf_config.get("num_experts") or hf_config.get("num_local_experts")
    moe_sizes = config.expert_parallel_size * config.expert_tensor_parallel_size
    if not experts:
        if moe_sizes > 1:
            raise ModelLayoutError(
                f"trainer.expert_parallel_size and trainer.expert_tensor_parallel_size must be 1 for the "
                f"dense model_type {model_type!r} (got {config.expert_parallel_size} and "
                f"{config.expert_tensor_parallel_size}); they apply to MoE models such as qwen3_moe"
            )
        return
    if tp > 1 and not config.sequence_parallel:
        raise ModelLayoutError(
            "trainer.sequence_parallel must be true when tensor_parallel_size > 1 for the MoE model_type "
            f"{model_type!r} (megatron-core trains MoE layers under tensor parallelism only with it)"
        )
    _divides("trainer.expert_parallel_size", config.expert_parallel_size, "num_experts", int(experts))
    expert_ranks = moe_sizes * pp
    if world_size % expert_ranks:
        raise ModelLayoutError(
            f"world size {world_size} is not a multiple of expert_parallel_size x "
            f"expert_tensor_parallel_size x pipeline_parallel_size = {expert_ranks}; change those sizes"
        )


def require_transformer_engine(context_parallel_size: int) -> None:
    """Raise `ModelLayoutError` if context parallelism is asked for and Transformer Engine is missing."""
    if context_parallel_size > 1 and not transformer_engine_installed():
        raise ModelLayoutError(
            f"trainer.context_parallel_size={context_parallel_size} needs Transformer Engine's attention, "
            "and transformer_engine is not importable here: pip install 'transformer-engine[pytorch]' on "
            "every GPU node, or set trainer.context_parallel_size: 1"
        )


def transformer_engine_installed() -> bool:
    return importlib.util.find_spec("transformer_engine") is not None


def _divides(key: str, size: int, model_key: str, value: int) -> None:
    if value % size:
        allowed = [d for d in range(1, value + 1) if value % d == 0]
        raise ModelLayoutError(
            f"{key}={size} does not divide the model's {model_key}={value}; "
            f"allowed values: {', '.join(map(str, allowed))}"
        )
