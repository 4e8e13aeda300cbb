"""Config of the scripted engine (`engines.engine.type: scripted`); importable without torch."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from roll.config import StrictConfig


class ScriptedEngineConfig(StrictConfig):
    """A test double of the model's choices on terminal tasks, for CI and benchmarks: each call answers the
    task's next oracle step (a `run_shell_command` call of its solution script, then a final message), with
    real token ids of the trainer's tokenizer. The trainer still trains the real model on those tokens."""

    type: Literal["scripted"] = Field(
        "scripted", description="Engine kind: scripted (a test double that plays each task's oracle)."
    )
    tasks_dir: Path = Field(Path("rome/tasks/terminal-pro"), description="Where the tasks' solutions are.")
    mistake_rate: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="Chance that a call sampled at temperature > 0 ends the episode at once (answers the "
        "final message instead of the next step); greedy calls never err.",
    )
    latency_s: float = Field(0.0, ge=0.0, description="Seconds every call takes (a model's generation).")
    seed: int = Field(0, description="Seed of the mistakes.")
