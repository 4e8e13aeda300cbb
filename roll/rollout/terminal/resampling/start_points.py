"""The start-point scheduler of initialized resampling, one per run (a Ray actor of the driver's).

Every training group of a task starts after the same prefix of that task's current expert: the first
member to ask fixes the group's start point (`group_start`), cycling over the parallel anchors (the current
rollback start and the anchors - 1 before it); every member gets the same expert snapshot, so a refresh in
the middle of a group does not split it. Each finished episode is recorded at its start (`report`), which
moves the rollback start back once the policy succeeds there; a success is offered to the expert book,
whose refresh rebases the task's schedule on the new expert.

The book lives under the run folder (`<run>/experts/<task>.json`, written at every refresh); the rollback
state goes into each checkpoint. `resume=true` restores both; a fresh run starts every task from its given
expert: its shortest recorded trajectory in env.experts, else its oracle solution.
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rock.proxy.types import EpisodeRecord
from roll.rollout.terminal.config import TerminalEnvConfig
from roll.rollout.terminal.resampling.expert import ExpertStep, oracle_expert, recorded_experts
from roll.rollout.terminal.resampling.expert_book import ExpertBook
from roll.rollout.terminal.resampling.expert_store import TaskExpert, task_fingerprint
from roll.rollout.terminal.resampling.rollback import SequentialRollback, StartStats
from roll.rollout.terminal.tasks import load_terminal_tasks


def anchor_offset(task_id: str) -> int:
    """A task's fixed pseudo-random offset into the cycle of anchors (the same in every run)."""
    return int.from_bytes(hashlib.sha256(task_id.encode()).digest()[:4], "big")


@dataclass(frozen=True)
class GroupStart:
    task_id: str
    start: int
    base: TaskExpert


class StartPoints:
    def __init__(self, config: TerminalEnvConfig, experts_dir: Path, state: dict[str, Any] | None) -> None:
        """`state`: what `state()` returned at the checkpoint a resumed run continues from (None: a fresh
        run, whose saved experts are removed)."""
        self.config = config
        tasks = load_terminal_tasks(config)
        recorded = recorded_experts(config.experts) if config.experts is not None else {}
        given = {task.id: recorded.get(task.id) or oracle_expert(task) for task in tasks}
        fingerprints = {task.id: task_fingerprint(task.path) for task in tasks}
        if state is None:
            shutil.rmtree(experts_dir, ignore_errors=True)
        labels = {task_id: f"recorded ({config.experts})" for task_id in recorded if task_id in given}
        self._given: list[str] = []
        resampling = config.resampling
        if config.experts is not None and (resampling.enabled or resampling.imitation):
            counted, source = f"{len(labels)} of {len(given)} train tasks", f"in {config.experts}"
            self._given.append(
                f"initialized resampling: {counted} start from their shortest successful trajectory "
                f"{source}, the others from their oracle solution"
                if resampling.enabled
                # Episodes start from scratch: the experts only feed the imitation fallback.
                else f"imitation fallback (every episode starts from scratch): {counted} imitate their "
                f"shortest successful trajectory {source}, the others their oracle solution"
            )
        self.book = ExpertBook(given, experts_dir, fingerprints, labels)
        self.starts = self.book.load_saved() if state is not None else {}
        rollback = config.resampling.rollback
        self.schedules = {
            task_id: SequentialRollback(
                len(self.book.current(task_id).steps),
                rollback.threshold,
                rollback.min_samples,
                rollback.window,
            )
            for task_id in given
        }
        for task_id, saved in (state or {}).items():
            self._restore(task_id, saved)
        self._groups: dict[str, GroupStart] = {}
        self._groups_of: dict[str, int] = {}
        self._offset = {task_id: anchor_offset(task_id) for task_id in self.schedules}

    def _restore(self, task_id: str, saved: dict[str, Any]) -> None:
        schedule = self.schedules.get(task_id)
        if schedule is None or saved["num_chunks"] != schedule.num_chunks:
            return  # a task no longer trained, or its expert changed after the checkpoint: start afresh
        schedule.current = saved["current"]
        schedule.stats = {int(k): StartStats(list(v)) for k, v in saved["outcomes"].items()}

    def describe(self) -> list[str]:
        """Where the given experts come from, then per task with a saved expert (a resumed run) which one it
        starts from and why not the saved one."""
        return [*self._given, *(start.describe() for start in self.starts.values())]

    def group_start(self, group_id: str, task_id: str) -> tuple[int, list[ExpertStep]]:
        """A training group's start point and the expert steps it starts after (same for every member)."""
        group = self._groups.get(group_id)
        if group is None:
            start = 0
            if self.config.resampling.enabled:
                count = self._groups_of.get(task_id, 0)
                self._groups_of[task_id] = count + 1
                anchors = self.schedules[task_id].anchors(self.config.resampling.anchors)
                points = sorted(set(anchors), reverse=True)
                # Offset per task: with many tasks each played once or twice (a generated task set), tasks
                # still start at different anchors, so a batch holds them all. The offset hashes the task's
                # name, not its position: families interleaved with a period sharing a factor with the
                # number of anchors would otherwise start every task of a family at the same anchor.
                start = points[(count + self._offset[task_id]) % len(points)]
            group = GroupStart(task_id, start, self.book.current(task_id))
            self._groups[group_id] = group
        return group.start, group.base.steps

    def report(self, group_id: str, success: bool, record: EpisodeRecord | None, version: int) -> bool:
        """One finished training episode of `group_id`; `record` (a success's proxy record) is offered to
        the expert book. True when it became the task's expert."""
        group = self._groups[group_id]
        schedule = self.schedules[group.task_id]
        if self.config.resampling.enabled:
            schedule.record(group.start, success)
        if not success or record is None:
            return False
        if not self.book.offer(group.task_id, group.base, group.start, record, version):
            return False
        schedule.rebase(len(self.book.current(group.task_id).steps), group.start)
        return True

    def state(self) -> dict[str, Any]:
        """The rollback state of every task, for a checkpoint."""
        return {
            task_id: {
                "num_chunks": schedule.num_chunks,
                "current": schedule.current,
                "outcomes": {str(k): s.outcomes for k, s in schedule.stats.items()},
            }
            for task_id, schedule in self.schedules.items()
        }

    def metrics(self) -> dict[str, float]:
        """Per task: the rollback start and the expert's length (and how much of it is the policy's)."""
        out: dict[str, float] = {}
        for task_id, schedule in self.schedules.items():
            expert = self.book.current(task_id)
            out[f"start/{task_id}"] = schedule.current
            out[f"expert_steps/{task_id}"] = len(expert.steps)
            out[f"expert_policy_steps/{task_id}"] = expert.native
        return out

    def experts(self) -> dict[str, list[ExpertStep]]:
        """Every task's current expert steps."""
        return {task_id: self.book.current(task_id).steps for task_id in self.schedules}
