"""Config of the terminal env manager (`env.type: terminal` in `roll train`): which tasks, where their
sandboxes run, where the agent runs, and the initialized-resampling schedule. Importable without torch."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator
from pydantic.fields import FieldInfo

from iflow.types import TRAINING_ENVIRONMENT, FixedEnvironment, PromptProfile
from roll.config import StrictConfig


class RockConfig(StrictConfig):
    """Where the episodes' sandboxes run."""

    admin_url: str | None = Field(
        None,
        description="A running `rock admin serve` (e.g. http://127.0.0.1:8080); None starts a private local "
        "fleet for the run, stopped (with every sandbox it made) when the run ends.",
    )
    slots: int = Field(8, ge=1, description="Sandboxes the private fleet runs at once (others queue).")
    packages: Literal["online", "offline"] | None = Field(
        None,
        description="The private fleet's package cache: online (fetches what it lacks from PyPI/Debian; "
        "offline when they cannot be reached) or offline (only what is seeded); None: $ALE_PACKAGES, else "
        "online. See rock.packages.mode.",
    )


class StatedEnvironment(StrictConfig):
    """The date and OS iflow's environment reminder states in the episodes a run plays and the teacher
    conversations it collects: fixed, so a task's prompt is the same on every day and machine (with today's
    date and the host's kernel, which a sandbox's uname reports, SFT data collected one day and an evaluation
    made the next differed by them). Train with the values you collect with."""

    environment_date: str = Field(
        TRAINING_ENVIRONMENT.date, min_length=1, description="The date iflow's environment reminder states."
    )
    environment_os: str = Field(
        TRAINING_ENVIRONMENT.os, min_length=1, description="The OS iflow's environment reminder states."
    )

    @property
    def environment(self) -> FixedEnvironment:
        return FixedEnvironment(self.environment_date, self.environment_os)


class TerminalAgentConfig(StatedEnvironment):
    """How the env runs the iflow agent on a task (where, how many calls, which prompt profile, how long);
    the agent's own run limits are iflow.agent.AgentConfig, which the runner builds from these."""

    placement: Literal["host", "sandbox"] = Field(
        "host",
        description="host: iflow runs in the rollout worker, its tools in the sandbox (ROCK executor); "
        "sandbox: iflow runs inside the sandbox and reaches its model through the rocklet's forwarder "
        "(the rollout worker must run on the sandbox's host: a local fleet).",
    )
    max_turns: int = Field(4, ge=1, description="Model calls per episode.")
    prompt_profile: PromptProfile = Field(
        "full",
        description="What the policy is shown of iflow (its promptProfile setting): full; compact (four "
        "tools with one-line descriptions and a short prompt: about 500 tokens of every call instead of "
        "2,000 with SmolLM2's tokenizer); or shell (compact with the shell as the only tool: about 260). "
        "SFT data should be collected with the same profile.",
    )
    timeout_s: float = Field(300.0, gt=0, description="Agent time per episode (one model call may take all).")


class RollbackConfig(StrictConfig):
    threshold: float = Field(
        0.5, gt=0, le=1, description="Success rate at the current start that moves it back."
    )
    min_samples: int = Field(2, ge=1, description="Episodes at the current start before it may move back.")
    window: int | None = Field(
        None,
        ge=1,
        description="Only the latest `window` episodes at a start count (null: all of them); the policy "
        "changes every step, so older episodes measured an older policy.",
    )

    @model_validator(mode="after")
    def _window_holds_min_samples(self) -> RollbackConfig:
        if self.window is not None and self.window < self.min_samples:
            raise ValueError(
                f"rollback.window ({self.window}) must be at least rollback.min_samples ({self.min_samples})"
            )
        return self


class ResamplingConfig(StrictConfig):
    """Initialized resampling: training episodes start after a prefix of the task's expert trajectory."""

    enabled: bool = Field(True, description="False: every training episode starts from scratch (k = 0).")
    anchors: int = Field(
        2,
        ge=1,
        description="Parallel anchors: a task's groups cycle over the current start and the anchors - 1 "
        "start points before it.",
    )
    rollback: RollbackConfig = Field(
        default_factory=RollbackConfig, description="When the current start point moves back."
    )
    imitation: bool = Field(
        True,
        description="Imitation fallback: a group none of whose episodes succeeded also trains one "
        "trajectory of expert chunks (the expert's step at the group's start, in the policy's context).",
    )
    crucial_fork_gap: float = Field(0.5, gt=0, le=1, description="Success jump that marks a crucial fork.")


# Held-out candidates tried per held-out instance asked for, before the data stage says the family cannot give
# enough new ones.
HELD_OUT_SEEDS_PER_INSTANCE = 50
# Seeds a balanced train set (env.data.balance_train) may try per train instance, for each operation's turn.
TRAIN_SEEDS_PER_INSTANCE = 16


class CollectSettings(StatedEnvironment):
    """How trajectories are collected on a task set's valid instances: the options of `rome data collect`
    (generated from these fields) and, for the knobs the data recipe shares, the data stage's collect step."""

    agent: Literal["iflow", "oracle-teacher"] = Field(
        "oracle-teacher",
        description="Who plays: oracle-teacher (the task's oracle replayed as iflow tool calls) or iflow "
        "(the iflow agent on --model).",
    )
    model: str | None = Field(
        None,
        description="iflow only: an OpenAI-compatible base URL, builtin:ID or a model folder (served here).",
    )
    attempts: int = Field(1, ge=1, description="Episodes per instance.")
    concurrency: int = Field(2, ge=1, description="Episodes (sandboxes) run at once.")
    mistake_rate: float = Field(
        0.3,
        ge=0,
        le=1,
        description="oracle-teacher only: share of attempts with a failed-then-fixed step (error-masked in "
        "SFT), 0 to 1.",
    )
    max_turns: int = Field(30, ge=1, description="Model calls per episode at most.")
    prompt_profile: PromptProfile = Field(
        "full",
        description="iflow's prompt profile (its promptProfile setting): full, compact or shell; train with "
        "the profile you collect with.",
    )
    agent_timeout_s: float | None = Field(
        None, gt=0, description="Agent time per episode in seconds; unset: each task's own timeout."
    )


def _collect_field(name: str, default: object) -> Any:
    """A recipe field that is `CollectSettings.<name>` (same meaning, bounds and description) with the data
    stage's own default: the stage trains on what it collects, so it asks for more than one quick run."""
    return FieldInfo.merge_field_infos(CollectSettings.model_fields[name], default=default)


class TerminalDataConfig(StrictConfig):
    """The run makes its own tasks and SFT data (the ROME data pipeline, `rome data`): it generates instances
    of task families, validates them (oracle passes, nop fails, twice), collects oracle-teacher trajectories
    in iflow's own format on the valid train instances, filters them (heuristics, safety, execution replay)
    and exports error-masked SFT data for warm_start. Everything is cached by content under
    $ALE_HOME/datasets/: a rerun with the same families, seeds and generators reuses it."""

    families: dict[str, dict[str, str | int | float | bool]] = Field(
        min_length=1,
        description="Family name -> its knobs (`rome data families` lists both), e.g. "
        "{file-ops: {level: 1}}.",
    )
    train_per_family: int = Field(8, ge=1, description="Train instances per family (seeds from train_seed).")
    rl_per_family: int = Field(
        0,
        ge=0,
        description="Instances per family that only RL plays, from the seeds after the train ones, each "
        "repeating no train instruction or oracle: the SFT data never shows them, so RL's groups meet "
        "instances as new to the policy as the held-out ones. 0: RL plays the train instances SFT imitated.",
    )
    eval_per_family: int = Field(
        16, ge=1, description="Held-out instances per family (seeds from eval_seed), never trained on."
    )
    out_of_family: dict[str, dict[str, str | int | float | bool]] = Field(
        default_factory=dict,
        description="Families the run never trains on, evaluated apart as an out-of-family held-out set "
        "(eval_per_family instances each), e.g. {line-filter: {level: 1}} beside text-search: a family whose "
        "skills the trained families teach, in a combination they never ask for.",
    )
    train_seed: int = Field(0, ge=0, description="Seed of each family's first train instance.")
    balance_train: bool = Field(
        False,
        description="Spread each family's train instances evenly over the operations its instances ask for "
        "(numeric's statistic, file-ops' operation, ...): seeds from train_seed are taken in order, each "
        "only when its operation's turn has come. False: the train_per_family seeds from train_seed, "
        "whatever they ask.",
    )
    eval_seed: int = Field(
        100_000,
        ge=0,
        description="Seed of each family's first held-out candidate; a candidate whose instruction or oracle "
        "commands repeat a train instance's (or an earlier held-out one's) is skipped for the next seed.",
    )
    # The collect step's knobs are CollectSettings' fields (the stage's agent is always the oracle teacher, in
    # env.agent's prompt profile); `collect_settings` hands them over by name.
    attempts: int = _collect_field("attempts", 2)
    mistake_rate: float = _collect_field("mistake_rate", 0.3)
    max_turns: int = _collect_field("max_turns", 30)
    replay: bool = Field(True, description="Filter by re-running each kept trajectory in a fresh sandbox.")
    sft_stage: Literal[1, 2] = Field(1, description="1: every kept trajectory; 2: verified, shortest only.")
    concurrency: int = _collect_field("concurrency", 4)

    def collect_settings(self, agent: TerminalAgentConfig) -> CollectSettings:
        """The collect step's settings: every CollectSettings field this recipe also has, by name, and the
        prompt the run's agent is shown (its profile and environment): SFT trains on what it collects."""
        shared = self.model_dump(include=set(CollectSettings.model_fields))
        return CollectSettings(
            agent="oracle-teacher",
            prompt_profile=agent.prompt_profile,
            environment_date=agent.environment_date,
            environment_os=agent.environment_os,
            **shared,
        )

    @property
    def train_seed_span(self) -> int:
        """Seeds from train_seed the train instances may come from (a balanced set skips seeds)."""
        return self.train_per_family * (TRAIN_SEEDS_PER_INSTANCE if self.balance_train else 1)

    @property
    def rl_seed_span(self) -> int:
        """Seeds after the train ones that the RL-only instances may come from: like held-out candidates,
        those that repeat a train instance are skipped."""
        return self.rl_per_family * HELD_OUT_SEEDS_PER_INSTANCE

    @property
    def held_out_seed_span(self) -> int:
        """Seeds from eval_seed that the held-out instances may come from: candidates that repeat a train
        instance are skipped, so it reaches past eval_per_family."""
        return self.eval_per_family * HELD_OUT_SEEDS_PER_INSTANCE

    @model_validator(mode="after")
    def _out_of_family_is_not_trained(self) -> TerminalDataConfig:
        if shared := sorted(set(self.families) & set(self.out_of_family)):
            raise ValueError(
                f"env.data.out_of_family must name families the run does not train on, but "
                f"{', '.join(shared)} is also in env.data.families"
            )
        return self

    @model_validator(mode="after")
    def _eval_seeds_never_trained(self) -> TerminalDataConfig:
        train = range(self.train_seed, self.train_seed + self.train_seed_span + self.rl_seed_span)
        held_out = range(self.eval_seed, self.eval_seed + self.held_out_seed_span)
        if train.start < held_out.stop and held_out.start < train.stop:
            what = "train seeds" if not self.rl_per_family else "train and RL-only candidates' seeds"
            raise ValueError(
                f"env.data: {what} {train.start}..{train.stop - 1} and the held-out candidates' seeds "
                f"{held_out.start}..{held_out.stop - 1} ({HELD_OUT_SEEDS_PER_INSTANCE} per held-out "
                "or RL-only instance) overlap; move eval_seed past the train seeds"
            )
        return self


class TerminalEnvConfig(StrictConfig):
    """Terminal tasks (Harbor / Terminal-Bench layout): an iflow agent in a ROCK sandbox, graded by the
    task's own tests (reward 1 when they pass)."""

    type: Literal["terminal"] = Field("terminal", description="Env kind: terminal (agent-native tasks).")
    tasks_dir: Path = Field(Path("rome/tasks/terminal-pro"), description="Folder of task folders.")
    task_ids: list[str] = Field(
        default_factory=list,
        description="Tasks to train on (folder names); train group g plays task g mod N. Filled by env.data "
        "when that is set.",
    )
    eval_task_ids: list[str] = Field(
        default_factory=list,
        description="Held-out tasks under tasks_dir, never trained on: each evaluation plays every one from "
        "scratch (k = 0), eval.episodes times, and compares evaluations task by task (sign test). Empty: "
        "the evaluation plays every start point k of task_ids instead.",
    )
    out_of_family_task_ids: list[str] = Field(
        default_factory=list,
        description="A second held-out set under tasks_dir, of families the run never trains on: played and "
        "reported like eval_task_ids, apart from them.",
    )
    data: TerminalDataConfig | None = Field(
        None,
        description="Generate the tasks and SFT data instead of naming them: fills tasks_dir, task_ids, "
        "eval_task_ids, out_of_family_task_ids and warm_start's SFT data.",
    )
    experts: Path | None = Field(
        None,
        description="Expert trajectories in the agent's own format (JSONL of rome trajectory records, e.g. "
        "the data stage's kept.jsonl, which env.data names here): a train task's shortest successful one "
        "starts its expert for initialized resampling and imitation instead of its oracle solution script.",
    )
    agent: TerminalAgentConfig = Field(
        default_factory=TerminalAgentConfig, description="The agent that plays each episode."
    )
    rock: RockConfig = Field(default_factory=RockConfig, description="Where the sandboxes run.")
    resampling: ResamplingConfig = Field(
        default_factory=ResamplingConfig, description="Initialized resampling of the training episodes."
    )
    success_reward: float = Field(
        1.0, description="An episode succeeds when its test reward is at least this."
    )

    @model_validator(mode="after")
    def _tasks_named_or_generated(self) -> TerminalEnvConfig:
        if self.data is None and not self.task_ids:
            raise ValueError(
                "env.task_ids is empty: name the tasks to train on, or set env.data to generate them"
            )
        if self.data is not None and (self.task_ids or self.eval_task_ids or self.out_of_family_task_ids):
            raise ValueError(
                "env.data generates the tasks, so env.task_ids, env.eval_task_ids and "
                "env.out_of_family_task_ids must be left out"
            )
        return self

    @model_validator(mode="after")
    def _held_out_means_never_trained(self) -> TerminalEnvConfig:
        for name, held_out in (
            ("eval_task_ids", self.eval_task_ids),
            ("out_of_family_task_ids", self.out_of_family_task_ids),
        ):
            if shared := sorted(set(self.task_ids) & set(held_out)):
                raise ValueError(
                    f"env.{name} must be held out from env.task_ids, but both name {', '.join(shared)}"
                )
        if shared := sorted(set(self.eval_task_ids) & set(self.out_of_family_task_ids)):
            raise ValueError(
                "env.eval_task_ids and env.out_of_family_task_ids are two held-out sets and must not share "
                f"tasks, but both name {', '.join(shared)}"
            )
        return self

    @property
    def held_out_task_ids(self) -> list[str]:
        """Every held-out task, in-family first: the order evaluation plays them in."""
        return [*self.eval_task_ids, *self.out_of_family_task_ids]
