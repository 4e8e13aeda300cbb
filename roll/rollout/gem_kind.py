"""The GEM env kind (`env.type: gem`): any gem-llm env id, played in the rollout worker
(roll.rollout.gem_env).

Its evaluation plays fixed env seeds `eval.seed_offset ..`, apart from the training seeds; a run shares
nothing between workers, so its driver side holds nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roll.rollout.config import GEMEnvConfig
from roll.rollout.env_kind import EnvManager, EnvRun, EvalSet, RunSettings, SettingsT
from roll.rollout.episode import EpisodeTask
from roll.types import Trajectory

if TYPE_CHECKING:
    from rich.table import Table
    from transformers import PreTrainedTokenizerBase

    from roll.rollout.engine_front import EngineFront


class GEMRun:
    """A GEM run's driver side: only its evaluation seeds."""

    services: Any = None

    def describe(self) -> list[str]:
        return []

    def eval_tasks(self, episodes: int, seed_offset: int) -> list[EpisodeTask]:
        return [EpisodeTask(f"eval{seed}", seed) for seed in range(seed_offset, seed_offset + episodes)]

    def metrics(self) -> dict[str, float]:
        return {}

    def state(self) -> dict[str, Any]:
        return {}

    def worker_lost(self, worker_id: str) -> int:
        return 0

    def close(self) -> None:
        pass


class GEMKind:
    name = "gem"
    config_type = GEMEnvConfig
    summary_columns = frozenset({"format_errors"})

    def check_settings(self, settings: RunSettings) -> None:
        pass

    def prepare(self, settings: SettingsT, say: Callable[[str], None]) -> SettingsT:
        return settings

    def check(self, settings: RunSettings) -> None:
        from roll.rollout.gem_env import check_env

        check_env(settings.env, settings.train_seed_offset)

    def errors(self) -> tuple[type[Exception], ...]:
        from roll.rollout.gem_env import EnvUnavailableError

        return (EnvUnavailableError,)

    def start(self, settings: RunSettings, resume: dict[str, Any] | None) -> EnvRun:
        return GEMRun()

    def make_manager(
        self,
        env: GEMEnvConfig,
        tokenizer: PreTrainedTokenizerBase,
        fronts: Sequence[EngineFront],
        services: Any,
        worker_id: str,
    ) -> EnvManager:
        import gem  # noqa: F401  (imported once here, not inside the first episode)

        from roll.rollout.gem_env import GEMEnvManager

        return GEMEnvManager(env, tokenizer, [front.generate_ids for front in fronts])

    def eval_sets(
        self, env: GEMEnvConfig, tasks: list[EpisodeTask], results: list[Trajectory | None], episodes: int
    ) -> tuple[EvalSet, dict[str, EvalSet]]:
        played = [t for t in results if t is not None]
        fields = {
            "won_seeds": sorted(t.metadata["seed"] for t in played if t.metadata["success"]),
            "seed_rewards": {str(t.metadata["seed"]): t.reward for t in played},
        }
        return EvalSet(played, len(results) - len(played), fields), {}

    def eval_description(self, env: GEMEnvConfig, episodes: int, seed_offset: int) -> str:
        seeds = f"env seeds {seed_offset}..{seed_offset + episodes - 1}"
        return f"{env.env_id}, {seeds} (fixed, apart from training seeds)"

    def eval_sources(self, env: GEMEnvConfig) -> list[Path] | None:
        """A local GEM env is its config and code; one a ROCK fleet serves runs code this run cannot see."""
        return None if env.rock_url else []

    def summary_tables(self, env: GEMEnvConfig, evals: list[dict[str, Any]]) -> list[Table]:
        return []
