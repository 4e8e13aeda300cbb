"""Initialized resampling as the terminal env manager sees it: one object per rollout worker.

`StartScheduler.begin` says where an episode starts: a training episode at its group's start point, which
the run's `StartPoints` actor picks (rollback and parallel anchors over the task's current expert); an
evaluation episode at the start point its task names, after the task's oracle expert. `finish` records a
training episode's outcome with the actor (a success is offered to the expert book) and returns the
imitation fallback of a failed one: the expert's step at its start, in the context the policy had there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rock.proxy.types import EpisodeRecord
from roll.rollout.episode import EpisodeTask
from roll.rollout.terminal.config import TerminalEnvConfig
from roll.rollout.terminal.resampling.expert import ExpertStep
from roll.rollout.terminal.resampling.imitation import imitation_fallback
from roll.types import Trajectory

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


@dataclass(frozen=True)
class EpisodeStart:
    """Where one episode starts: after `expert[:start]`."""

    start: int
    expert: list[ExpertStep]


class StartScheduler:
    def __init__(
        self,
        config: TerminalEnvConfig,
        start_points: Any,
        oracles: dict[str, list[ExpertStep]],
        tokenizer: PreTrainedTokenizerBase,
    ) -> None:
        """`start_points`: the run's `StartPoints` actor (a Ray handle); `oracles`: every task's oracle
        expert (train and held-out), which evaluation episodes start after."""
        self.config = config
        self.start_points = start_points
        self.oracles = oracles
        self.tokenizer = tokenizer

    async def begin(self, task: EpisodeTask, task_id: str) -> EpisodeStart:
        """The start of `task` (a training episode when `task.start` is None) on the task `task_id`."""
        if task.start is None:
            start, expert = await self.start_points.group_start.remote(task.group_id, task_id)
            return EpisodeStart(start, expert)
        return EpisodeStart(task.start, self.oracles[task_id])

    async def finish(
        self, task: EpisodeTask, task_id: str, begun: EpisodeStart, record: EpisodeRecord, success: bool
    ) -> Trajectory | None:
        """After a played training episode: its outcome goes to the scheduler, and a failure brings the
        imitation fallback of its group (with env.resampling.imitation, while the expert has a step at its
        start). None for evaluation episodes and otherwise."""
        if task.start is not None:
            return None
        version = record.chunks[0].chunk.weight_version
        offered = record if success else None
        await self.start_points.report.remote(task.group_id, success, offered, version)
        if success or not self.config.resampling.imitation or begun.start >= len(begun.expert):
            return None
        group = f"{task.group_id}/expert"
        return imitation_fallback(record, begun.expert, begun.start, self.tokenizer, task_id, group)
