"""LR multiplier per step: linear warmup, then constant / linear / cosine decay."""

from __future__ import annotations

import math

from roll.trainer.config import ScheduleConfig


def lr_factor(config: ScheduleConfig, step: int) -> float:
    """Multiplier of the peak LR at optimizer step `step` (0-based)."""
    if config.warmup_steps and step < config.warmup_steps:
        return (step + 1) / config.warmup_steps
    if config.type == "constant" or config.total_steps is None:
        return 1.0
    span = max(config.total_steps - config.warmup_steps, 1)
    progress = min(max(step - config.warmup_steps, 0) / span, 1.0)
    decay = 1.0 - progress if config.type == "linear" else 0.5 * (1.0 + math.cos(math.pi * progress))
    return config.min_lr_ratio + (1.0 - config.min_lr_ratio) * decay
