"""Config of `roll train` (see configs/ipa.yaml); importable without torch or Ray."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Discriminator, Field, Tag, model_validator

from roll.algo.config import IPALossConfig, LossConfig
from roll.config import StrictConfig, type_or_torch
from roll.engine.sglang.config import SGLangEngineConfig
from roll.engine.torch_engine.config import TorchEngineConfig
from roll.pipeline.episodes import EpisodeLogConfig
from roll.rollout.config import SamplingConfig
from roll.rollout.envs import EnvConfig, default_env_config, env_kind
from roll.rollout.terminal.scripted_config import ScriptedEngineConfig
from roll.trainer.config import TorchBackendConfig
from roll.trainer.protocol import TrainerConfig

EngineConfig = Annotated[
    Annotated[TorchEngineConfig, Tag("torch")]
    | Annotated[SGLangEngineConfig, Tag("sglang")]
    | Annotated[ScriptedEngineConfig, Tag("scripted")],
    Discriminator(
        type_or_torch,
        custom_error_type="unknown_engine",
        custom_error_message="engines.engine.type must be 'torch', 'sglang' or 'scripted'",
    ),
]
"""engines.engine.type: torch (the embedded engine), sglang (needs CUDA and the gpu extra) or scripted (a
test double of the model's choices on terminal tasks, for CI and benchmarks)."""


class RolloutConfig(StrictConfig):
    """Rollout workers and group sampling."""

    num_workers: int = Field(2, ge=1, description="Rollout worker actors.")
    episodes_in_flight: int = Field(8, ge=1, description="Episodes each worker plays at once.")
    group_size: int = Field(4, ge=1, description="Episodes per env seed (group baselines need >= 2).")
    groups_per_step: int = Field(4, ge=1, description="Groups in one train batch.")
    max_attempts: int = Field(3, ge=1, description="Tries of an episode that fails for infra reasons.")
    drop_uniform_groups: int = Field(
        0,
        ge=0,
        description="Dynamic sampling: up to N groups per step whose episodes all got the same reward (no "
        "group-baseline signal) are dropped and replaced by new groups; 0 keeps every group.",
    )
    sampling: SamplingConfig = Field(
        default_factory=SamplingConfig, description="How training episodes sample."
    )

    @model_validator(mode="after")
    def _uniform_needs_groups(self) -> RolloutConfig:
        if self.drop_uniform_groups and self.group_size < 2:
            raise ValueError(
                "rollout.drop_uniform_groups needs rollout.group_size >= 2 (a group of one always has a "
                "single reward): raise group_size or set drop_uniform_groups: 0"
            )
        return self


class EnginesConfig(StrictConfig):
    """The engine group: one or more inference engines, all serving the latest weights."""

    num_engines: int = Field(1, ge=1, description="Inference engines (Ray actors) serving the rollout.")
    engine: EngineConfig = Field(
        default_factory=TorchEngineConfig, description="Each engine's kind and settings, chosen by type."
    )
    weight_sync: Literal["finish", "abort"] = Field(
        "finish",
        description="At a weight update: finish (requests in flight end on the old weights, new ones wait) "
        "or abort (in-flight requests are aborted and generated again on the new weights).",
    )


class MultiplexConfig(StrictConfig):
    """Train-rollout multiplexing: put engines to sleep while the trainer steps (their devices go to it)."""

    enabled: bool = Field(
        False, description="Sleep engines during train steps (False: they keep generating)."
    )
    min_awake: int = Field(0, ge=0, description="Engines kept generating during a train step (0: all sleep).")


class ResourcesConfig(StrictConfig):
    """What each role declares to Ray, and its torch threads (None: Ray's default for the actor)."""

    trainer_ranks: int = Field(
        1,
        ge=1,
        description="Trainer actors forming one torch.distributed group (FSDP2 for the torch backend, "
        "Megatron's parallel layout); trainer_cpus, trainer_gpus and trainer_threads are per rank.",
    )
    trainer_cpus: float = Field(1.0, ge=0.0, description="Per trainer rank.")
    engine_cpus: float = Field(1.0, ge=0.0, description="Per engine.")
    trainer_threads: int | None = Field(None, ge=1, description="torch threads per trainer rank.")
    engine_threads: int | None = Field(None, ge=1, description="torch threads per engine.")
    trainer_gpus: float = Field(0.0, ge=0.0, description="Per trainer rank.")
    engine_gpus: float = Field(0.0, ge=0.0, description="Per engine.")


RewardSource = Literal["env", "success"]


class RewardConfig(StrictConfig):
    source: RewardSource = Field(
        "env",
        description="env: the sum of the env's step rewards (with any shaping the env adds, e.g. partial "
        "credit for a near miss); success: 1 for an episode that succeeded (its last step reward >= "
        "env.success_reward), else 0.",
    )
    normalization: Literal["none", "group", "group_std", "batch_std"] = Field(
        "none",
        description="none; group: subtract the group's mean reward; group_std: and divide by its std; "
        "batch_std: z-score over the whole batch.",
    )
    eps: float = Field(1e-6, gt=0.0, description="Added to the std before dividing (group_std, batch_std).")
    imitation_in_baseline: bool = Field(
        True,
        description="Whether an imitation fallback (the expert's step, reward 1, added to a group whose "
        "episodes all failed) counts in its group's mean and std. true: the failed episodes then get a "
        "negative advantage; false: the statistics are over the episodes the policy played, so an all-failed "
        "group trains only the expert's step (by its NLL) and its own episodes get advantage 0.",
    )


class EvalConfig(StrictConfig):
    """Evaluation on fixed env seeds, apart from training episodes (seeds from train_seed_offset on)."""

    every: int = Field(0, ge=0, description="Evaluate every N steps (0: only before and after training).")
    episodes: int = Field(
        16,
        ge=0,
        description="GEM: seeds seed_offset .. seed_offset + episodes - 1. Terminal: episodes at every start "
        "point k of every task (k oracle expert steps prefilled).",
    )
    seed_offset: int = Field(
        0,
        ge=0,
        description="GEM: env seed of the first eval episode. Terminal envs must leave it 0: their eval "
        "episodes are the tasks themselves (env.task_ids at every start point, or env.eval_task_ids), and "
        "their model calls carry no sampling seed (the engine draws one), so an offset would change nothing.",
    )
    sampling: SamplingConfig = Field(
        default_factory=lambda: SamplingConfig(temperature=0.0),
        description="How evaluation episodes sample (greedy by default).",
    )
    reuse: bool = Field(
        True,
        description="Reuse a stored greedy evaluation of the same fixed weights (the base or SFT model) with "
        "the same settings, tasks and code instead of playing it again (<output root>/.evaluations; see "
        "roll.pipeline.eval_reuse). false: every evaluation plays.",
    )


class WarmStartConfig(StrictConfig):
    """An SFT stage before RL: `roll sft` on sft_config, whose exported model then starts the RL run."""

    sft_config: Path = Field(description="A `roll sft` config; its output_dir/model becomes the policy.")
    overrides: list[str] = Field(default_factory=list, description="key=value overrides of sft_config.")
    eval_base: bool = Field(True, description="Also evaluate the model before SFT (summary row 'base').")


class RayConfig(StrictConfig):
    address: str | None = Field(
        None, description="An existing Ray cluster (or RAY_ADDRESS); None starts a new local one for the run."
    )
    num_cpus: int | None = Field(None, ge=1, description="CPUs of a local Ray (None: all).")


class TrainConfig(StrictConfig):
    """An RL run: policy (trainer.model), environment, rollout, loss, and the async/sync schedule."""

    name: str = Field("run", pattern=r"^[A-Za-z0-9_.\-]+$", description="Results go to runs/<name>/.")
    output_dir: Path | None = Field(None, description="Where results go (default runs/<name>).")
    steps: int = Field(10, ge=1, description="Train steps.")
    async_ratio: int = Field(
        1, ge=0, description="Most weight versions a trained chunk may lag behind (0: synchronous)."
    )
    train_seed_offset: int = Field(10_000, ge=0, description="Env seed of the first training group.")
    save_every: int = Field(1, ge=0, description="Checkpoint every N steps (0: only at the end).")
    keep_checkpoints: int = Field(
        1, ge=1, description="Newest checkpoints kept (each: weights and optimizer state; resume needs one)."
    )
    resume: bool = Field(False, description="Continue from the last checkpoint in the output dir.")
    trainer: TrainerConfig = Field(
        default_factory=TorchBackendConfig, description="The train backend and policy, chosen by type."
    )
    loss: LossConfig = Field(default_factory=IPALossConfig, description="The loss, chosen by type.")
    env: EnvConfig = Field(default_factory=default_env_config, description="The environment, chosen by type.")
    rollout: RolloutConfig = Field(default_factory=RolloutConfig, description="Rollout workers and groups.")
    engines: EnginesConfig = Field(default_factory=EnginesConfig, description="The inference engine group.")
    multiplex: MultiplexConfig = Field(
        default_factory=MultiplexConfig, description="Sleeping engines while the trainer steps."
    )
    resources: ResourcesConfig = Field(
        default_factory=ResourcesConfig, description="CPUs, GPUs and threads each role asks of Ray."
    )
    reward: RewardConfig = Field(
        default_factory=RewardConfig, description="What the reward is, normalised how."
    )
    eval: EvalConfig = Field(default_factory=EvalConfig, description="Evaluation before, during and after.")
    warm_start: WarmStartConfig | None = Field(
        None, description="An SFT stage before RL; null: RL starts from trainer.model."
    )
    ray: RayConfig = Field(default_factory=RayConfig, description="Which Ray cluster runs the run.")
    episodes: EpisodeLogConfig = Field(
        default_factory=EpisodeLogConfig, description="Which episodes are written to disk for viewing."
    )

    @model_validator(mode="after")
    def _reference_needs_the_torch_trainer(self) -> TrainConfig:
        if getattr(self.loss, "kl_coef", 0.0) > 0 and self.trainer.type != "torch":
            raise ValueError(
                f"loss.kl_coef={self.loss.kl_coef} needs trainer.type: torch (the {self.trainer.type} "
                "trainer keeps no reference model): set loss.kl_coef=0 or use the torch trainer"
            )
        return self

    @model_validator(mode="after")
    def _fits_the_env(self) -> TrainConfig:
        """The env kind checks the rest of the config (a terminal env has no eval.seed_offset)."""
        env_kind(self.env.type).check_settings(self)
        return self

    @property
    def run_dir(self) -> Path:
        return self.output_dir or Path("runs") / self.name

    @property
    def batch_size(self) -> int:
        return self.rollout.group_size * self.rollout.groups_per_step
