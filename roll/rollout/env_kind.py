"""One protocol for every env kind, so the training pipeline never names one.

An env kind (GEM text envs, agent-native terminal tasks) is an `EnvKind` in the registry of
`roll.rollout.envs`, chosen by the config's `env.type`. It owns what differs between kinds: checking and
preparing the run's config, the driver's side of a run (`EnvRun`: services its rollout workers share, the
evaluation episodes, checkpoint state), the rollout worker's `EnvManager`, how an evaluation's results are
summarised, and what the summary shows. The pipeline calls these hooks and nothing else of a kind.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar

from roll.rollout.config import SamplingConfig
from roll.rollout.episode import EpisodeTask
from roll.types import Trajectory

if TYPE_CHECKING:
    from rich.table import Table
    from transformers import PreTrainedTokenizerBase

    from roll.config import StrictConfig
    from roll.rollout.engine_front import EngineFront


class RunSettings(Protocol):
    """What an env kind reads of a `roll train` config (`roll.pipeline.config.TrainConfig`, which the
    rollout package does not import: the pipeline sits above it)."""

    @property
    def env(self) -> Any: ...
    @property
    def engines(self) -> Any: ...
    @property
    def eval(self) -> Any: ...
    @property
    def trainer(self) -> Any: ...
    @property
    def warm_start(self) -> Any: ...
    @property
    def train_seed_offset(self) -> int: ...
    @property
    def run_dir(self) -> Path: ...

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self: ...


SettingsT = TypeVar("SettingsT", bound=RunSettings)


class EnvManager(Protocol):
    """A rollout worker's player of one env kind's episodes."""

    async def run_episode(
        self, task: EpisodeTask, engine: int, sampling: SamplingConfig
    ) -> tuple[Trajectory, Trajectory | None]:
        """Play `task` with every model call on engine `engine`; returns its trajectory and, where the kind
        has one (a failed terminal training episode), the imitation fallback of its group, else None.
        Infrastructure failures raise `roll.rollout.episode.EpisodeError`."""
        ...


class EnvRun(Protocol):
    """The driver's side of an env kind for one run."""

    @property
    def services(self) -> Any:
        """What every rollout worker's env manager shares (Ray handles and such; None where nothing is)."""
        ...

    def describe(self) -> list[str]:
        """Lines for the run's log when it starts."""
        ...

    def eval_tasks(self, episodes: int, seed_offset: int) -> list[EpisodeTask]:
        """The episodes of one evaluation (the same at every evaluation)."""
        ...

    def metrics(self) -> dict[str, float]:
        """Per-step metrics of the kind (added to the step record)."""
        ...

    def state(self) -> dict[str, Any]:
        """Fields added to a checkpoint record; `EnvKind.start` gets the record back on resume."""
        ...

    def worker_lost(self, worker_id: str) -> int:
        """A rollout worker died or stopped: free what it held; returns how many things were freed."""
        ...

    def close(self) -> None:
        """After the rollout workers were stopped."""
        ...


@dataclass(frozen=True)
class EvalSet:
    """One set of an evaluation's episodes: those played, how many failed to run, and the record's fields
    of the kind (at least `won_seeds` and `seed_rewards`, the keys of the seed-by-seed comparison)."""

    played: list[Trajectory]
    failed: int
    fields: dict[str, Any] = field(default_factory=dict)


class EnvKind(Protocol):
    """One env kind: its `env.type`, its config model, and the hooks the pipeline calls."""

    name: str
    config_type: type[StrictConfig]
    summary_columns: frozenset[str]
    """Which of the summary table's optional columns this kind's evaluations fill (roll.pipeline.display)."""

    def check_settings(self, settings: RunSettings) -> None:
        """Validate the rest of the run's config against this env; raises ValueError saying what to change."""
        ...

    def prepare(self, settings: SettingsT, say: Callable[[str], None]) -> SettingsT:
        """Before anything starts: make what the env needs (a data stage) and return the config naming it."""
        ...

    def check(self, settings: RunSettings) -> None:
        """Stop before any actor starts when the env cannot run here."""
        ...

    def errors(self) -> tuple[type[Exception], ...]:
        """What `prepare`, `check` and `start` raise for an env that cannot run (bad tasks, data, env id):
        `roll train` shows them as one line, without a traceback."""
        ...

    def start(self, settings: RunSettings, resume: dict[str, Any] | None) -> EnvRun:
        """The driver's side of the run; `resume`: the checkpoint record a resumed run continues from."""
        ...

    def make_manager(
        self,
        env: Any,
        tokenizer: PreTrainedTokenizerBase,
        fronts: Sequence[EngineFront],
        services: Any,
        worker_id: str,
    ) -> EnvManager:
        """A rollout worker's env manager, playing on `fronts` with its run's `services`."""
        ...

    def eval_sets(
        self, env: Any, tasks: list[EpisodeTask], results: list[Trajectory | None], episodes: int
    ) -> tuple[EvalSet, dict[str, EvalSet]]:
        """An evaluation's results: the set the record is about, and any sets kept apart, by name."""
        ...

    def eval_description(self, env: Any, episodes: int, seed_offset: int) -> str:
        """What an evaluation plays, for the summary's settings line."""
        ...

    def eval_sources(self, env: Any) -> list[Path] | None:
        """Besides the env config and ALE's code, the files and folders whose content decides what an
        evaluation plays (task folders); None when content cannot tell (an env served from elsewhere), so a
        greedy evaluation of the same weights is never reused (roll.pipeline.eval_reuse)."""
        ...

    def summary_tables(self, env: Any, evals: list[dict[str, Any]]) -> list[Table]:
        """Tables of the kind after the summary table (the evaluations that played episodes)."""
        ...
