"""The SFT loop: seeded batches per epoch, error-masked loss, checkpoints, JSONL + TensorBoard metrics."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from transformers import AutoTokenizer

from roll.algo.losses import build_loss
from roll.models import resolve_model_path
from roll.progress import StepProgress
from roll.sft.config import SFTConfig
from roll.sft.data import load_trajectories
from roll.trainer.packing import pack_trajectories
from roll.trainer.protocol import TrainBackend, build_backend
from roll.types import Trajectory

LATEST = "latest"


def batch_order(num_examples: int, batch_size: int, epoch: int, seed: int) -> list[list[int]]:
    """The batches of one epoch: a seeded permutation cut into batch_size pieces (the last may be short)."""
    perm = torch.randperm(num_examples, generator=torch.Generator().manual_seed(seed + epoch)).tolist()
    return [perm[i : i + batch_size] for i in range(0, num_examples, batch_size)]


def latest_checkpoint(output_dir: Path) -> Path | None:
    marker = output_dir / "checkpoints" / LATEST
    if not marker.is_file():
        return None
    return output_dir / "checkpoints" / marker.read_text().strip()


def _save(backend: TrainBackend, output_dir: Path) -> Path:
    name = f"step_{backend.step:06d}"
    folder = output_dir / "checkpoints" / name
    backend.save(folder)
    (output_dir / "checkpoints" / LATEST).write_text(name)
    return folder


def _fit(trajectories: list[Trajectory], max_tokens: int | None, console: Console) -> list[Trajectory]:
    if max_tokens is None:
        return trajectories
    kept = [t for t in trajectories if pack_trajectories([t]).num_tokens <= max_tokens]
    if len(kept) < len(trajectories):
        skipped = len(trajectories) - len(kept)
        console.print(f"[yellow]Skipped {skipped} conversations over {max_tokens} tokens")
    if not kept:
        raise ValueError(f"every conversation is longer than data.max_tokens={max_tokens}; raise it")
    return kept


def run_sft(config: SFTConfig, console: Console | None = None) -> dict[str, Any]:
    """Train; returns the last step's metrics (with 'step'). Resumes from output_dir when asked."""
    console = console or Console(stderr=True)
    torch.manual_seed(config.seed)
    backend = build_backend(config.trainer)
    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(config.trainer.model))
    trajectories = _fit(load_trajectories(config.data.path, tokenizer), config.data.max_tokens, console)
    steps_per_epoch = math.ceil(len(trajectories) / config.batch_size)
    total = steps_per_epoch * config.epochs
    if config.max_steps is not None:
        total = min(total, config.max_steps)
    output = config.output_dir
    output.mkdir(parents=True, exist_ok=True)
    checkpoint = latest_checkpoint(output) if config.resume else None
    if checkpoint is not None:
        backend.load(checkpoint)
        console.print(f"Resumed from {checkpoint} at step {backend.step}")
    (output / "config.json").write_text(config.model_dump_json(indent=2))

    from torch.utils.tensorboard import SummaryWriter

    loss = build_loss(config.loss)
    last: dict[str, Any] = {"step": backend.step}
    with (
        SummaryWriter(str(output / "tensorboard")) as writer,
        (output / "metrics.jsonl").open("a") as log,
        StepProgress(console, total, backend.step, "SFT step") as progress,
    ):
        while backend.step < total:
            epoch, index = divmod(backend.step, steps_per_epoch)
            picked = batch_order(len(trajectories), config.batch_size, epoch, config.seed)[index]
            metrics = backend.train_step(pack_trajectories([trajectories[i] for i in picked]), loss)
            last = {"epoch": epoch, **metrics}
            log.write(json.dumps(last) + "\n")
            log.flush()
            for name, value in metrics.items():
                writer.add_scalar(name, value, backend.step)
            progress.update(backend.step, f"loss {metrics['loss']:.4f}")
            if config.save_every and backend.step % config.save_every == 0:
                _save(backend, output)
    if latest_checkpoint(output) != output / "checkpoints" / f"step_{backend.step:06d}":
        _save(backend, output)
    if config.export_model:
        backend.export_hf(output / "model")
    return last
