"""The train backends: the contract each keeps (torch, Megatron-core), which one a config's `trainer:`
section names (shared by `roll train` and `roll sft`), and building it.

Importable without torch or megatron-core; `build_backend` imports only the backend asked for.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Protocol

from pydantic import Discriminator, Tag

from roll.config import type_or_torch
from roll.trainer.config import TorchBackendConfig
from roll.trainer.megatron.config import MegatronBackendConfig

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


TrainerConfig = Annotated[
    Annotated[TorchBackendConfig, Tag("torch")] | Annotated[MegatronBackendConfig, Tag("megatron")],
    Discriminator(
        type_or_torch,
        custom_error_type="unknown_trainer",
        custom_error_message="trainer.type must be 'torch' or 'megatron'",
    ),
]
"""trainer.type: torch (CPU, one GPU or FSDP2) or megatron (megatron-core, needs CUDA and the gpu extra)."""


def build_backend(config: TorchBackendConfig | MegatronBackendConfig) -> TrainBackend:
    """The train backend `trainer.type` names; megatron-core is imported only when asked for."""
    if config.type == "megatron":
        from roll.trainer.megatron.backend import MegatronBackend

        return MegatronBackend(config)
    from roll.trainer.torch_backend import TorchBackend

    return TorchBackend(config)
