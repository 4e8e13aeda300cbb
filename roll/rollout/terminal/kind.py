"""The terminal env kind (`env.type: terminal`): agent-native terminal tasks in ROCK sandboxes.

A run may first make its tasks and SFT data (`env.data`, the data stage); its driver side is a
`TerminalRun` (fleet, start-point scheduler, sandbox ledger); its evaluation plays the held-out tasks from
scratch (in family, out of family kept apart), or without held-out tasks every start point of every train
task, summarised by start point with each task's crucial fork.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roll.rollout.env_kind import EnvManager, EnvRun, EvalSet, RunSettings, SettingsT
from roll.rollout.episode import EpisodeTask
from roll.rollout.terminal.config import TerminalEnvConfig
from roll.types import Trajectory

if TYPE_CHECKING:
    from rich.table import Table
    from transformers import PreTrainedTokenizerBase

    from roll.rollout.engine_front import EngineFront


class TerminalKind:
    name = "terminal"
    config_type = TerminalEnvConfig
    summary_columns = frozenset({"agent_errors"})

    def check_settings(self, settings: RunSettings) -> None:
        if settings.eval.seed_offset:
            raise ValueError(
                f"eval.seed_offset is {settings.eval.seed_offset}, but a terminal env (env.type: terminal) "
                "does not use it: its eval episodes are its tasks (env.task_ids at every start point k, or "
                "the held-out env.eval_task_ids), and their sampling is not seeded. Remove eval.seed_offset; "
                "to evaluate other tasks, name them in env.eval_task_ids"
            )

    def prepare(self, settings: SettingsT, say: Callable[[str], None]) -> SettingsT:
        """With env.data, make (or find cached) the run's tasks and SFT data; the returned config names them:
        tasks_dir, task_ids, the held-out sets, experts, and the SFT data of warm_start."""
        env: TerminalEnvConfig = settings.env
        if env.data is None:
            return settings
        from roll.rollout.terminal.data_stage import prepare_terminal_data
        from roll.rollout.terminal.scripted_config import ScriptedEngineConfig

        prepared = prepare_terminal_data(env, say)
        for line in prepared.summary:
            say(line)
        env = env.model_copy(
            update={
                "data": None,
                "tasks_dir": prepared.tasks_dir,
                "task_ids": prepared.train_ids,
                "eval_task_ids": prepared.eval_ids,
                "out_of_family_task_ids": prepared.out_of_family_ids,
                "experts": prepared.experts,
            }
        )
        update: dict[str, Any] = {"env": env}
        engines = settings.engines
        if isinstance(engines.engine, ScriptedEngineConfig):  # it replays the oracles of the run's tasks
            engine = engines.engine.model_copy(update={"tasks_dir": prepared.tasks_dir})
            update["engines"] = engines.model_copy(update={"engine": engine})
        if settings.warm_start is not None:
            overrides = [*settings.warm_start.overrides, f"data.path={prepared.sft_path}"]
            update["warm_start"] = settings.warm_start.model_copy(update={"overrides": overrides})
        return settings.model_copy(update=update)

    def check(self, settings: RunSettings) -> None:
        """The tasks must load (their images are built by the run's fleet once it is up: TerminalRun)."""
        from roll.rollout.terminal.tasks import prepare_terminal_env

        prepare_terminal_env(settings.env)

    def errors(self) -> tuple[type[Exception], ...]:
        from roll.rollout.terminal.data_stage import DataStageError
        from roll.rollout.terminal.resampling.expert import RecordedExpertsError
        from roll.rollout.terminal.tasks import TerminalTasksError

        return (TerminalTasksError, DataStageError, RecordedExpertsError)

    def start(self, settings: RunSettings, resume: dict[str, Any] | None) -> EnvRun:
        from roll.rollout.terminal.run import TerminalRun

        return TerminalRun(settings, resume.get("start_points", {}) if resume is not None else None)

    def make_manager(
        self,
        env: TerminalEnvConfig,
        tokenizer: PreTrainedTokenizerBase,
        fronts: Sequence[EngineFront],
        services: Any,
        worker_id: str,
    ) -> EnvManager:
        from roll.rollout.terminal.manager import TerminalEnvManager

        if services is None:
            raise ValueError(
                "a terminal env manager needs its run's TerminalServices (fleet, scheduler, ledger): start "
                "the run with EnvKind.start and hand its `services` to every rollout worker"
            )
        return TerminalEnvManager(
            env,
            tokenizer,
            services.model_id,
            list(fronts),
            services.admin_url,
            services.start_points,
            services.ledger,
            worker_id,
        )

    def eval_sets(
        self,
        env: TerminalEnvConfig,
        tasks: list[EpisodeTask],
        results: list[Trajectory | None],
        episodes: int,
    ) -> tuple[EvalSet, dict[str, EvalSet]]:
        """In-family held-out results are the record's own; the out-of-family set is kept apart."""
        from roll.rollout.terminal.evaluation import eval_fields, held_out_sets

        sets = held_out_sets(tasks, results, set(env.out_of_family_task_ids))
        gap = env.resampling.crucial_fork_gap
        played, failed = sets["in_family"]
        main = EvalSet(played, failed, eval_fields(played, episodes, gap))
        apart: dict[str, EvalSet] = {}
        if "out_of_family" in sets:
            other, other_failed = sets["out_of_family"]
            fields = eval_fields(other, episodes, gap)
            kept = {"won_seeds": fields["won_seeds"], "seed_rewards": fields["seed_rewards"]}
            apart["out_of_family"] = EvalSet(other, other_failed, kept)
        return main, apart

    def eval_description(self, env: TerminalEnvConfig, episodes: int, seed_offset: int) -> str:
        if env.held_out_task_ids:
            apart = len(env.out_of_family_task_ids)
            return (
                f"{len(env.eval_task_ids)} held-out terminal tasks (new instances of the trained families)"
                + (f" and {apart} out-of-family tasks (families never trained on)" if apart else "")
                + f", {episodes} episode(s) each from scratch"
            )
        return (
            f"terminal tasks {', '.join(env.task_ids)}, {episodes} episode(s) at every start point k "
            "(k oracle steps prefilled)"
        )

    def eval_sources(self, env: TerminalEnvConfig) -> list[Path] | None:
        """The folders of the tasks an evaluation plays (instruction, environment, tests, solution), and
        without held-out tasks the recorded experts whose steps it prefills."""
        folders = [env.tasks_dir / task_id for task_id in env.held_out_task_ids or env.task_ids]
        experts = [env.experts] if env.experts is not None and not env.held_out_task_ids else []
        return [*folders, *experts]

    def summary_tables(self, env: TerminalEnvConfig, evals: list[dict[str, Any]]) -> list[Table]:
        """Without held-out tasks: success by task and start point, and each task's crucial fork."""
        if not evals or env.held_out_task_ids:
            return []
        from roll.rollout.terminal.report import start_point_table

        title = "Eval success by task and start point k (fork: the step k whose prefill helps most)"
        return [start_point_table(evals, title)]
