"""The contract every train backend keeps (torch here; Megatron-core later)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import torch

    from roll.algo.batch import PackedBatch
    from roll.algo.losses import Loss


@dataclass
class InferenceWeights:
    """Full (unsharded) weights for an inference engine, tagged with the version they represent."""

    state_dict: dict[str, torch.Tensor]
    version: int


class TrainBackend(Protocol):
    version: int  # increases by one with every optimizer step
    step: int

    def logprobs(self, batch: PackedBatch) -> torch.Tensor:
        """Per-token logprobs [T] of the batch under the current weights (0 where loss_mask is False)."""
        ...

    def train_step(self, batch: PackedBatch, loss: Loss) -> dict[str, float]:
        """One optimizer step on the whole batch (micro-batched); returns the step's metrics."""
        ...

    def state_dict_for_inference(self) -> InferenceWeights: ...

    def save(self, directory: Path) -> None:
        """Checkpoint model, optimizer, scheduler, step, version and RNG states."""
        ...

    def load(self, directory: Path) -> None:
        """Restore a checkpoint written by `save`; the next step continues exactly."""
        ...

    def export_hf(self, directory: Path) -> None:
        """Write a Hugging Face model folder (config, safetensors, tokenizer)."""
        ...
