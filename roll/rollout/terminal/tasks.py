"""The tasks of a terminal env: loaded once per process, checked before the run starts."""

from __future__ import annotations

from roll.rollout.terminal.config import TerminalEnvConfig
from roll.rollout.terminal.resampling.expert import ExpertStep, oracle_expert, recorded_experts
from rome.terminal_tasks.task import Task, load_task


class TerminalTasksError(RuntimeError):
    """The configured tasks cannot be trained on; the message says which and what to do."""


def load_terminal_tasks(config: TerminalEnvConfig, held_out: bool = False) -> list[Task]:
    """env.task_ids in order (train group g plays task g mod N), or with `held_out` every held-out task (in
    family, then out of family: env.held_out_task_ids); every
    one must load and have an oracle solution (the expert trajectory of initialized resampling and of the
    evaluation's start points)."""
    tasks = []
    for task_id in config.held_out_task_ids if held_out else config.task_ids:
        loaded = load_task(config.tasks_dir / task_id)
        if not isinstance(loaded, Task):
            raise TerminalTasksError(
                f"env.task_ids: task {task_id!r} under env.tasks_dir {config.tasks_dir} does not load: "
                f"{loaded}. Fix the task or leave it out"
            )
        if loaded.solution_command is None or not loaded.solution_files:
            raise TerminalTasksError(
                f"env.task_ids: task {task_id!r} has no solution script, so it has no expert trajectory for "
                "initialized resampling; add solution/solve.sh or leave the task out"
            )
        tasks.append(loaded)
    return tasks


def oracle_experts(tasks: list[Task]) -> dict[str, list[ExpertStep]]:
    return {task.id: oracle_expert(task) for task in tasks}


def prepare_terminal_env(config: TerminalEnvConfig) -> list[Task]:
    """Before any actor starts (and before the SFT warm start): the tasks load and env.experts reads (a bad
    file raises RecordedExpertsError naming its line). Their images are built once the run's fleet is up
    (`roll.rollout.terminal.run.build_task_images`)."""
    tasks = load_terminal_tasks(config) + load_terminal_tasks(config, held_out=True)
    if config.experts is not None:
        recorded_experts(config.experts)
    return tasks
