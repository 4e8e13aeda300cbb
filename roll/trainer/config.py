"""Config of the torch train backend: model, precision, micro-batching, optimizer and LR schedule."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from roll.config import StrictConfig


class OptimizerConfig(StrictConfig):
    """AdamW and gradient clipping."""

    lr: float = Field(1e-5, gt=0.0, description="Peak learning rate.")
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = Field(1e-8, gt=0.0)
    weight_decay: float = Field(0.0, ge=0.0)
    grad_clip: float = Field(1.0, gt=0.0, description="Max global gradient norm.")


class ScheduleConfig(StrictConfig):
    """LR schedule: linear warmup, then constant, linear or cosine decay to min_lr_ratio * lr."""

    type: Literal["constant", "linear", "cosine"] = "constant"
    warmup_steps: int = Field(0, ge=0)
    total_steps: int | None = Field(None, ge=1, description="Steps over which linear/cosine decay.")
    min_lr_ratio: float = Field(0.0, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _decay_needs_total(self) -> ScheduleConfig:
        if self.type != "constant" and self.total_steps is None:
            raise ValueError(f"schedule type {self.type!r} needs total_steps; set it or use type: constant")
        return self


class TorchBackendConfig(StrictConfig):
    """The embedded train backend: a transformers model trained with plain torch (FSDP2 when distributed)."""

    type: Literal["torch"] = "torch"
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
    activation_checkpointing: bool = False
    compute_entropy: bool = Field(True, description="Report the policy entropy of trained tokens.")
    seed: int = 0
    optimizer: OptimizerConfig = Field(default_factory=OptimizerConfig)
    schedule: ScheduleConfig = Field(default_factory=ScheduleConfig)
