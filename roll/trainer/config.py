"""Config of the torch train backend: model, precision, micro-batching, optimizer and LR schedule."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from roll.config import StrictConfig


class OptimizerConfig(StrictConfig):
    """AdamW and gradient clipping."""

    lr: float = Field(1e-5, gt=0.0, description="Peak learning rate.")
    betas: tuple[float, float] = Field((0.9, 0.999), description="AdamW's (beta1, beta2) moment decays.")
    eps: float = Field(1e-8, gt=0.0, description="AdamW's epsilon, added to the second moment's root.")
    weight_decay: float = Field(
        0.0, ge=0.0, description="AdamW's decoupled weight decay per step (times lr)."
    )
    grad_clip: float = Field(1.0, gt=0.0, description="Max global gradient norm.")


class ScheduleConfig(StrictConfig):
    """LR schedule: linear warmup, then constant, linear or cosine decay to min_lr_ratio * lr."""

    type: Literal["constant", "linear", "cosine"] = Field(
        "constant", description="Decay after warmup: constant, linear or cosine."
    )
    warmup_steps: int = Field(0, ge=0, description="Optimizer steps of linear warmup from 0 to lr.")
    total_steps: int | None = Field(None, ge=1, description="Steps over which linear/cosine decay.")
    min_lr_ratio: float = Field(0.0, ge=0.0, le=1.0, description="Final lr as a share of lr (0 to 1).")

    @model_validator(mode="after")
    def _decay_needs_total(self) -> ScheduleConfig:
        if self.type != "constant" and self.total_steps is None:
            raise ValueError(f"schedule type {self.type!r} needs total_steps; set it or use type: constant")
        return self


class TorchBackendConfig(StrictConfig):
    """The embedded train backend: a transformers model trained with plain torch (FSDP2 when distributed)."""

    type: Literal["torch"] = Field("torch", description="Train backend: torch.")
    model: str = Field(
        "builtin:smollm2-135m-instruct", description="Model id: a builtin:* name or a Hugging Face folder."
    )
    device: str = Field("cpu", description="cpu, cuda, or cuda:N.")
    dtype: Literal["float32", "bfloat16"] = Field(
        "float32", description="Compute dtype; weights and optimizer state stay float32 (autocast for bf16)."
    )
    micro_batch_tokens: int = Field(
        4096,
        ge=1,
        description="Token budget of a micro-batch (whole trajectories; a longer one runs alone). Padded, it "
        "counts padded slots: sequences times the longest.",
    )
    packing: bool = Field(
        True, description="Padding-free packed forward; False pads to the longest (benchmark baseline)."
    )
    shared_prefix_tokens: int = Field(
        32,
        ge=0,
        description="Packed under roll_varlen attention (CPU, or CUDA without flash-attention): every start "
        "at least this long that sequences of a micro-batch share (an agent's system prompt, a group's task) "
        "is computed once, with the same logprobs and gradients; the micro-batch budget counts it once. 0: "
        "every sequence is computed whole.",
    )
    activation_checkpointing: bool = Field(
        False, description="Recompute each layer's activations in the backward pass (less memory, more time)."
    )
    compute_entropy: bool = Field(True, description="Report the policy entropy of trained tokens.")
    seed: int = Field(0, description="Seed of torch's generators (dropout, initialisation of new weights).")
    optimizer: OptimizerConfig = Field(default_factory=OptimizerConfig, description="AdamW and clipping.")
    schedule: ScheduleConfig = Field(default_factory=ScheduleConfig, description="The LR schedule.")
