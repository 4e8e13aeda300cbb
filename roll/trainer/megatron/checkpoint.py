"""Checkpoints of the megatron backend: each rank's parameters, optimizer state and RNG states, plus
checkpoint.json (step, weight version, parallel layout). A checkpoint loads only under the layout and world
size that wrote it; `export_hf` gives a layout-free Hugging Face folder instead."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.distributed as dist

from roll.trainer.megatron.weights import local_parameters

if TYPE_CHECKING:
    from roll.trainer.megatron.backend import MegatronBackend
    from roll.trainer.megatron.config import MegatronBackendConfig

META_FILE = "checkpoint.json"


def layout_meta(config: MegatronBackendConfig, world_size: int) -> dict[str, int]:
    """What must match between the run that saved a checkpoint and the one loading it."""
    return {
        "world_size": world_size,
        "tensor_parallel_size": config.tensor_parallel_size,
        "pipeline_parallel_size": config.pipeline_parallel_size,
        "expert_parallel_size": config.expert_parallel_size,
        "expert_tensor_parallel_size": config.expert_tensor_parallel_size,
        "context_parallel_size": config.context_parallel_size,
    }


def save_checkpoint(backend: MegatronBackend, directory: Path) -> None:
    """Every rank writes its files; rank 0 writes checkpoint.json last, once all are on disk."""
    from megatron.core.tensor_parallel import get_cuda_rng_tracker

    directory.mkdir(parents=True, exist_ok=True)
    rank = dist.get_rank()
    params = {name: p.detach().cpu() for name, p in local_parameters(backend.model).items()}
    torch.save(params, directory / f"model_rank{rank}.pt")
    torch.save(backend.optimizer.state_dict(), directory / f"optimizer_rank{rank}.pt")
    if backend.config.distributed_optimizer:
        backend.optimizer.save_parameter_state(str(directory / f"optimizer_params_rank{rank}.pt"))
    rng = {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state() if torch.cuda.is_available() else None,
        "tracker": get_cuda_rng_tracker().get_states(),
        "python": random.getstate(),
        "numpy": np.random.get_state(),
    }
    torch.save(rng, directory / f"rng_rank{rank}.pt")
    dist.barrier()
    if rank == 0:
        meta = {
            "step": backend.step,
            "version": backend.version,
            **layout_meta(backend.config, dist.get_world_size()),
        }
        (directory / META_FILE).write_text(json.dumps(meta))
    dist.barrier()


def load_checkpoint(backend: MegatronBackend, directory: Path) -> None:
    """Checks checkpoint.json against this run's layout before reading any other file."""
    from megatron.core.tensor_parallel import get_cuda_rng_tracker

    if not (directory / META_FILE).is_file():
        raise FileNotFoundError(
            f"{directory} holds no complete checkpoint ({META_FILE} missing); "
            "pass a directory written by save()"
        )
    meta = json.loads((directory / META_FILE).read_text())
    mine = layout_meta(backend.config, dist.get_world_size())
    # checkpoints written before context parallelism was supported were written without it
    layout = {key: meta.get(key, 1 if key == "context_parallel_size" else None) for key in mine}
    if layout != mine:
        raise ValueError(
            f"checkpoint {directory} was written with {layout}, this run has {mine}; "
            "load it with the same parallel sizes and number of GPUs (or export_hf and start from that)"
        )
    rank = dist.get_rank()
    params = torch.load(directory / f"model_rank{rank}.pt", map_location="cpu")
    with torch.no_grad():
        for name, p in local_parameters(backend.model).items():
            p.copy_(params[name])
    backend.optimizer.load_state_dict(torch.load(directory / f"optimizer_rank{rank}.pt", weights_only=False))
    if backend.config.distributed_optimizer:
        backend.optimizer.load_parameter_state(str(directory / f"optimizer_params_rank{rank}.pt"))
    rng = torch.load(directory / f"rng_rank{rank}.pt", weights_only=False)
    torch.set_rng_state(rng["torch"])
    if rng["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state(rng["cuda"])
    get_cuda_rng_tracker().set_states(rng["tracker"])
    random.setstate(rng["python"])
    np.random.set_state(rng["numpy"])
    backend.step, backend.version = int(meta["step"]), int(meta["version"])
