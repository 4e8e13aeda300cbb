"""Evaluation of terminal envs: every start point k of every task (k oracle expert steps prefilled), the
same episodes at every evaluation, so two evaluations compare start point by start point.

An evaluation's key for one episode is `task@k` (with `#i` for the i-th episode when there are several): it
plays the part of a GEM seed in the pipeline's seed-by-seed comparison.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from roll.rollout.episode import EpisodeTask
from roll.rollout.terminal.resampling.rollback import crucial_fork
from roll.types import Trajectory


def eval_tasks(expert_lengths: dict[str, int], episodes: int) -> list[EpisodeTask]:
    """`episodes` episodes at every start point 0..K-1 of every task (in env.task_ids order: the seed is the
    task's index)."""
    return [
        EpisodeTask(f"eval-{task_id}-k{start}", seed=index, index=repeat, start=start)
        for index, (task_id, length) in enumerate(expert_lengths.items())
        for start in range(length)
        for repeat in range(episodes)
    ]


def held_out_tasks(task_ids: list[str], episodes: int) -> list[EpisodeTask]:
    """`episodes` episodes of every held-out task from scratch (the seed: its index in `task_ids`)."""
    return [
        EpisodeTask(f"eval-{task_id}", seed=index, index=repeat, start=0)
        for index, task_id in enumerate(task_ids)
        for repeat in range(episodes)
    ]


def held_out_sets(
    tasks: list[EpisodeTask], results: list[Trajectory | None], out_of_family: set[str]
) -> dict[str, tuple[list[Trajectory], int]]:
    """The held-out results apart by set: "in_family" (new instances of the trained families) and, when the
    run has any, "out_of_family" (families it never trains on): each set's played episodes and how many
    failed to run. A task's id is its group id after `eval-`."""
    sets: dict[str, tuple[list[Trajectory], int]] = {"in_family": ([], 0)}
    if out_of_family:
        sets["out_of_family"] = ([], 0)
    for task, result in zip(tasks, results, strict=True):
        name = "out_of_family" if task.group_id.removeprefix("eval-") in out_of_family else "in_family"
        played, failed = sets[name]
        sets[name] = ([*played, result], failed) if result is not None else (played, failed + 1)
    return sets


def episode_key(trajectory: Trajectory, episodes: int) -> str:
    meta = trajectory.metadata
    key = f"{meta['task']}@{meta['start']}"
    return key if episodes == 1 else f"{key}#{meta['index']}"


def eval_fields(played: list[Trajectory], episodes: int, fork_gap: float) -> dict[str, Any]:
    """What an eval record holds for terminal envs: the won episodes and rewards by key, the success rate by
    task and start point, and each task's crucial fork (None when no jump reaches `fork_gap`)."""
    wins: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for trajectory in played:
        meta = trajectory.metadata
        wins[meta["task"]][meta["start"]].append(float(meta["success"]))
    by_start = {
        task: {str(k): sum(v) / len(v) for k, v in sorted(starts.items())} for task, starts in wins.items()
    }
    return {
        "won_seeds": sorted(episode_key(t, episodes) for t in played if t.metadata["success"]),
        "seed_rewards": {episode_key(t, episodes): t.reward for t in played},
        "by_start": by_start,
        "crucial_fork": {
            task: crucial_fork({int(k): v for k, v in rates.items()}, fork_gap)
            for task, rates in by_start.items()
        },
    }
