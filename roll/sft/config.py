"""Config of `roll sft` (see configs/sft.yaml)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from roll.algo.config import SFTLossConfig
from roll.config import StrictConfig
from roll.trainer.config import TorchBackendConfig
from roll.trainer.protocol import TrainerConfig


class SFTDataConfig(StrictConfig):
    path: Path = Field(description="JSONL file: one {'messages': [...], 'tools': [...]} object per line.")
    max_tokens: int | None = Field(
        None, ge=1, description="Skip conversations whose packed length exceeds this many tokens."
    )


class SFTConfig(StrictConfig):
    """Error-masked SFT run: data, train backend, loss, schedule of steps, and where results go."""

    data: SFTDataConfig = Field(description="The conversations to train on.")
    trainer: TrainerConfig = Field(
        default_factory=TorchBackendConfig, description="The train backend and model, chosen by type."
    )
    loss: SFTLossConfig = Field(default_factory=SFTLossConfig, description="The error-masked SFT loss.")
    batch_size: int = Field(8, ge=1, description="Conversations per optimizer step.")
    epochs: int = Field(1, ge=1, description="Passes over the data.")
    max_steps: int | None = Field(None, ge=1, description="Stop after this many steps (all epochs if unset).")
    output_dir: Path = Field(Path("runs/sft"), description="Checkpoints, metrics, model.")
    save_every: int = Field(0, ge=0, description="Checkpoint every N steps (0: only at the end).")
    resume: bool = Field(True, description="Continue from the latest checkpoint in output_dir, if any.")
    export_model: bool = Field(True, description="Write a HF folder to output_dir/model at the end.")
    seed: int = Field(0, description="Seed of torch and of the batch order (shuffled per epoch).")
