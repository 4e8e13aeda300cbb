"""Config of IPA on terminal tasks (`configs/ipa_terminal.yaml`): the tasks, the resampling schedule, the
evaluation by start point and the training rounds. Importable without torch."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator

from roll.algo.config import IPALossConfig
from roll.config import StrictConfig
from roll.trainer.config import OptimizerConfig


class RollbackConfig(StrictConfig):
    threshold: float = Field(
        0.5, gt=0, le=1, description="Success rate at the current start that moves it back"
    )
    min_samples: int = Field(2, ge=1, description="Episodes at the current start before it may move back")
    window: int | None = Field(
        None,
        ge=1,
        description="Only the latest `window` episodes at a start count (null: all of them); the policy "
        "changes every round, so older episodes measured an older policy",
    )

    @model_validator(mode="after")
    def _window_holds_min_samples(self) -> RollbackConfig:
        if self.window is not None and self.window < self.min_samples:
            raise ValueError(
                f"rollback.window ({self.window}) must be at least rollback.min_samples ({self.min_samples})"
            )
        return self


class EvalConfig(StrictConfig):
    """Success rate by start point, measured before and after training."""

    episodes_per_start: int = Field(1, ge=1, description="Episodes at every start point 0..K-1")
    temperature: float = Field(0.0, ge=0, description="Sampling temperature of evaluation episodes")
    every_round: bool = Field(
        False,
        description="Also after every training round (the last one is the `after` evaluation), so the report "
        "shows how success by start point moves round by round",
    )


class TrainConfig(StrictConfig):
    """What one round trains: the IPA loss on the round's trajectories, a few optimizer steps."""

    steps_per_round: int = Field(2, ge=1, description="Optimizer steps on each round's batch")
    loss: IPALossConfig = Field(default_factory=IPALossConfig)
    optimizer: OptimizerConfig = Field(default_factory=lambda: OptimizerConfig(lr=5e-5))
    micro_batch_tokens: int = Field(4096, ge=1, description="Token budget of a trainer micro-batch")
    seed: int = 0


class IPATerminalConfig(StrictConfig):
    """Initialized resampling on terminal tasks (see `roll.rollout.agentic.ipa`)."""

    model: str = Field("builtin:smollm2-135m-instruct", description="Builtin id or model folder")
    tasks_dir: Path = Field(Path("rome/tasks/terminal-pro"), description="Folder of task folders")
    task_ids: list[str] = Field(min_length=1, description="Tasks to run (folder names)")
    rounds: int = Field(1, ge=0, description="Training rounds (0: evaluate only)")
    anchors: int = Field(3, ge=1, description="Start points per round: the current one and those before it")
    episodes_per_anchor: int = Field(1, ge=1)
    rollback: RollbackConfig = Field(default_factory=RollbackConfig)
    crucial_fork_gap: float = Field(0.5, gt=0, le=1, description="Success jump that marks a crucial fork")
    max_turns: int = Field(3, ge=1, description="Model calls per episode")
    max_tokens: int = Field(96, ge=1, description="Output tokens per model call")
    temperature: float = Field(0.7, ge=0, description="Sampling temperature of training episodes")
    agent_timeout_s: float = Field(300.0, gt=0)
    parallel_episodes: int = Field(
        4,
        ge=1,
        description="Episodes run at once, each in its own sandbox and proxy episode (the engine batches "
        "their calls); also the fleet's sandbox slots",
    )
    in_sandbox: bool = Field(False, description="Run iflow inside the task's sandbox instead of on the host")
    eval: EvalConfig = Field(default_factory=EvalConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    output: Path = Field(
        Path("runs/ipa_terminal"), description="Where report.json and the refreshed experts (experts/) go"
    )
