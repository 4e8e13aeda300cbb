"""Which train backend a config names: the `trainer:` section shared by `roll train` and `roll sft`.

Importable without torch or megatron-core; `build_backend` imports only the backend asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import Discriminator, Tag

from roll.config import type_or_torch
from roll.trainer.config import TorchBackendConfig
from roll.trainer.megatron.config import MegatronBackendConfig

if TYPE_CHECKING:
    from roll.trainer.protocol import TrainBackend

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
