"""The sample buffer: hands episodes to rollout workers, assembles train batches under a staleness bound.

Production is gated so rollout runs at most `async_ratio` steps ahead of training: new groups start only while
fewer than `(steps done + 1 + async_ratio) * groups_per_step` groups (plus those lost whole) have been
started, and never for a step past the run's last (`last_step`): those episodes would compete with the last
step's training and the final evaluation for the same CPUs, and no step would train them. `async_ratio: 0` is
therefore the synchronous pipeline: the next batch is generated only after the weights of the current step
reached the engines. The bound is also enforced on the data: a trajectory whose oldest chunk is more than
`async_ratio` versions behind the step that would train on it is dropped and counted. Episodes that fail for
infrastructure reasons, or whose worker died, are sampled again. The rollout is broken, and get_batch raises
with the most frequent reason instead of training on what is left, when LOST_GROUPS_LIMIT groups in a row lose
every episode that way (env or engine failing on every call), or when more than half of the last
FAILING_WINDOW episodes failed (sandboxes, proxy or engine failing most of the time: a run that went on would
train on the few episodes that happened to get through).

Dynamic sampling (`drop_uniform_groups: N`): a finished group whose episodes all got the same reward (as
reward.source picks it) has a zero group-baseline advantage, so it would cost a train step's compute and teach
nothing. Up to N such groups per step (a budget that grows by N with every step) are dropped and replaced by
new groups; past the budget they are kept, so a policy that wins (or loses) everything still trains.

Imitation fallback (terminal envs with initialized resampling): a failed episode may hand in, besides its
trajectory, a trajectory of expert chunks for its group. When a group resolves with no successful episode,
the first such fallback joins it, so the batch holds a positive sample (trained by imitation) for every
group the policy could not solve; a group with a success drops them.
"""

from __future__ import annotations

import asyncio
from collections import Counter, deque
from dataclasses import dataclass, field

from roll.pipeline.config import RewardSource
from roll.pipeline.rewards import source_reward
from roll.rollout.episode import EpisodeTask
from roll.types import Trajectory

LOST_GROUPS_LIMIT = 8
FAILING_WINDOW = 24


class RolloutFailing(RuntimeError):
    """Every episode of many groups in a row failed for infrastructure reasons."""


@dataclass
class _Group:
    seed: int
    members: int
    resolved: int = 0
    trajectories: list[Trajectory] = field(default_factory=list)
    fallback: Trajectory | None = None


@dataclass
class BufferCounters:
    groups_started: int = 0
    episodes_done: int = 0
    dropped_stale: int = 0
    infra_failed: int = 0
    infra_dropped: int = 0
    resampled_lost: int = 0
    groups_lost: int = 0
    dropped_uniform: int = 0
    imitation_groups: int = 0
    infra_failed_step: int = 0  # infra failures between the previous batch and the latest one


class SampleBuffer:
    def __init__(
        self,
        group_size: int,
        groups_per_step: int,
        async_ratio: int,
        max_attempts: int,
        seed_offset: int,
        step: int = 0,
        next_group: int = 0,
        drop_uniform_groups: int = 0,
        reward_source: RewardSource = "env",
        last_step: int | None = None,
    ) -> None:
        """`last_step`: the run's number of steps, past which no batch is made (None: no end)."""
        self.group_size = group_size
        self.groups_per_step = groups_per_step
        self.async_ratio = async_ratio
        self.max_attempts = max_attempts
        self.seed_offset = seed_offset
        self.drop_uniform_groups = drop_uniform_groups
        self.reward_source = reward_source
        self.step = step
        self.last_step = last_step
        self._first_step = step
        self._first_group = next_group
        self._next_group = next_group
        self._todo: deque[tuple[EpisodeTask, int]] = deque()
        self._leases: dict[str, dict[EpisodeTask, int]] = {}
        self._groups: dict[str, _Group] = {}
        self._ready: deque[str] = deque()
        self._changed = asyncio.Condition()
        self._stopped = False
        self._open = False
        self._dead: set[str] = set()
        self._lost_in_a_row = 0
        # The latest episode attempts: None for one played, the reason for one that failed.
        self._recent: deque[str | None] = deque(maxlen=FAILING_WINDOW)
        self._failed_since_batch = 0
        self.counters = BufferCounters()

    def _ahead(self) -> int:
        """How many batches, counted from this buffer's first step, rollout may have started."""
        furthest = self.step + 1 + self.async_ratio
        if self.last_step is not None:
            furthest = min(furthest, self.last_step)
        return furthest - self._first_step

    def _quota(self) -> int:
        replaced = self.counters.groups_lost + self.counters.dropped_uniform
        return self._ahead() * self.groups_per_step + replaced

    def _drops_uniform(self, group: _Group) -> bool:
        rewards = {source_reward(t, self.reward_source) for t in group.trajectories}
        budget = self._ahead() * self.drop_uniform_groups
        return len(rewards) == 1 and self.counters.dropped_uniform < budget

    def _is_stale(self, trajectory: Trajectory, step: int) -> bool:
        oldest = min(chunk.weight_version for chunk in trajectory.chunks)
        return step - oldest > self.async_ratio

    async def next_task(self, worker_id: str) -> EpisodeTask | None:
        """The next episode to play, waiting while rollout is as far ahead as allowed; None once stopped."""
        async with self._changed:
            # A dead worker's calls may still be waiting here; they must not take tasks it can never return.
            while not self._stopped and worker_id not in self._dead:
                if not self._open:
                    await self._changed.wait()
                    continue
                if self._todo:
                    task, attempts = self._todo.popleft()
                    self._leases.setdefault(worker_id, {})[task] = attempts
                    return task
                if self._next_group - self._first_group < self._quota():
                    self._start_group()
                    continue
                await self._changed.wait()
            return None

    def _start_group(self) -> None:
        index = self._next_group
        self._next_group += 1
        self.counters.groups_started += 1
        group_id = f"g{index}"
        seed = self.seed_offset + index
        self._groups[group_id] = _Group(seed=seed, members=self.group_size)
        self._todo.extend((EpisodeTask(group_id, seed, member), 0) for member in range(self.group_size))

    async def put(
        self, worker_id: str, task: EpisodeTask, trajectory: Trajectory, fallback: Trajectory | None = None
    ) -> None:
        """A played episode; `fallback`: the imitation trajectory its group trains if none of it succeeds."""
        async with self._changed:
            if not self._release(worker_id, task):
                return
            self.counters.episodes_done += 1
            self._recent.append(None)
            group = self._groups[task.group_id]
            if group.fallback is None:
                group.fallback = fallback
            if self._is_stale(trajectory, self.step):
                self.counters.dropped_stale += 1
                self._resolve(task, None)
            else:
                self._resolve(task, trajectory)
            self._changed.notify_all()

    async def fail(self, worker_id: str, task: EpisodeTask, reason: str = "no reason given") -> None:
        """An episode failed for infrastructure reasons (`reason`: what went wrong): play it again, up to
        max_attempts tries."""
        async with self._changed:
            attempts = self._leases.get(worker_id, {}).get(task, 0) + 1
            if not self._release(worker_id, task):
                return
            self.counters.infra_failed += 1
            self._failed_since_batch += 1
            self._recent.append(reason)
            if attempts < self.max_attempts:
                self._todo.appendleft((task, attempts))
            else:
                self.counters.infra_dropped += 1
                self._resolve(task, None)
            self._changed.notify_all()

    async def worker_lost(self, worker_id: str) -> int:
        """A worker died: its episodes in flight are sampled again. Returns how many."""
        async with self._changed:
            self._dead.add(worker_id)
            leased = self._leases.pop(worker_id, {})
            self._todo.extendleft(leased.items())
            self.counters.resampled_lost += len(leased)
            self._changed.notify_all()
            return len(leased)

    def _release(self, worker_id: str, task: EpisodeTask) -> bool:
        """End a lease; False when there is none (a worker declared dead, whose task was handed out again)."""
        leases = self._leases.get(worker_id, {})
        if task not in leases:
            return False
        del leases[task]
        return True

    def _resolve(self, task: EpisodeTask, trajectory: Trajectory | None) -> None:
        group = self._groups[task.group_id]
        group.resolved += 1
        if trajectory is not None:
            group.trajectories.append(trajectory)
        if group.resolved == group.members:
            succeeded = any(t.metadata.get("success") for t in group.trajectories)
            if group.trajectories and not succeeded and group.fallback is not None:
                group.trajectories.append(group.fallback)
                self.counters.imitation_groups += 1
            self._lost_in_a_row = 0 if group.trajectories else self._lost_in_a_row + 1
            if not group.trajectories:
                del self._groups[task.group_id]
                self.counters.groups_lost += 1
            elif self._drops_uniform(group):
                del self._groups[task.group_id]
                self.counters.dropped_uniform += 1
            else:
                self._ready.append(task.group_id)

    async def get_batch(self, step: int) -> list[Trajectory]:
        """groups_per_step complete groups for train step `step` (stale trajectories dropped on the way)."""
        async with self._changed:
            batch: list[Trajectory] = []
            taken = 0
            while taken < self.groups_per_step:
                if self._lost_in_a_row >= LOST_GROUPS_LIMIT:
                    raise RolloutFailing(
                        f"{self._lost_in_a_row} groups in a row lost every episode to errors (each tried "
                        f"{self.max_attempts} times): the env or the engine fails on every call; "
                        f"{self._most_frequent_reason()}. The rollout workers' log (above) has the details; "
                        "fix it and run again (resume=true continues)"
                    )
                failed = sum(reason is not None for reason in self._recent)
                if len(self._recent) == FAILING_WINDOW and 2 * failed > FAILING_WINDOW:
                    raise RolloutFailing(
                        f"{failed} of the last {FAILING_WINDOW} episodes failed for infrastructure reasons "
                        f"(env, sandbox, proxy or engine errors), so training would learn from the few that "
                        f"got through; {self._most_frequent_reason()}. The rollout workers' log (above) has "
                        "the details; fix it and run again (resume=true continues)"
                    )
                if not self._ready:
                    await self._changed.wait()
                    continue
                group = self._groups.pop(self._ready.popleft())
                fresh = [t for t in group.trajectories if not self._is_stale(t, step)]
                self.counters.dropped_stale += len(group.trajectories) - len(fresh)
                if not fresh:
                    self.counters.groups_lost += 1
                    self._changed.notify_all()
                    continue
                batch.extend(fresh)
                taken += 1
            self.counters.infra_failed_step, self._failed_since_batch = self._failed_since_batch, 0
            return batch

    def _most_frequent_reason(self) -> str:
        reasons = Counter(reason for reason in self._recent if reason is not None)
        if not reasons:
            return "no reason was reported"
        reason, count = reasons.most_common(1)[0]
        return f"the most frequent reason ({count} of the last {len(self._recent)} episodes): {reason}"

    async def set_step(self, step: int) -> None:
        """The weights of `step` reached the engines: rollout may move one step further ahead. Nothing is
        handed out before the first call, so no episode is played on weights that are not the policy's."""
        async with self._changed:
            self._open = True
            self.step = step
            self._changed.notify_all()

    async def stop(self) -> None:
        async with self._changed:
            self._stopped = True
            self._changed.notify_all()

    def in_flight(self, worker_id: str) -> list[EpisodeTask]:
        """The episodes a worker holds now."""
        return list(self._leases.get(worker_id, {}))

    def ready_groups(self) -> int:
        return len(self._ready)

    def next_group(self) -> int:
        return self._next_group

    def stats(self) -> dict[str, int]:
        in_flight = sum(len(leases) for leases in self._leases.values())
        return {
            **vars(self.counters),
            "ready_groups": len(self._ready),
            "queued": len(self._todo),
            "in_flight": in_flight,
        }
