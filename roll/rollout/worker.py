"""A rollout worker: plays many episodes at once, each on its own, and hands them to the sample buffer.

Runs as an async Ray actor. `run()` keeps `episodes_in_flight` episodes going: each takes a task from the
buffer, plays it with the env manager of its env kind (roll.rollout.envs; GEM: generate on an engine actor
and env step in a thread, turn by turn; terminal: an iflow agent in a ROCK sandbox whose model calls go
through a proxy to the engine), and returns its trajectory, so generation, env interaction and reward are
pipelined per episode with no batch barrier. An episode that fails for infrastructure reasons goes back to
the buffer to be sampled again.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from roll.rollout.config import SamplingConfig
from roll.rollout.engine_front import EngineFront
from roll.rollout.envs import EnvConfig, env_kind
from roll.rollout.episode import EpisodeTask
from roll.rollout.routing import EngineRouter
from roll.types import Trajectory

log = logging.getLogger(__name__)


class RolloutWorker:
    def __init__(
        self,
        worker_id: str,
        model_path: str,
        env: EnvConfig,
        sampling: SamplingConfig,
        episodes_in_flight: int,
        engines: list[Any],
        buffer: Any,
        services: Any = None,
    ) -> None:
        """`services`: what the env kind's run shares across workers (its `EnvRun.services`)."""
        from transformers import AutoTokenizer

        self.worker_id = worker_id
        tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.fronts = [EngineFront(engine, f"{worker_id}-e{index}") for index, engine in enumerate(engines)]
        self.manager = env_kind(env.type).make_manager(env, tokenizer, self.fronts, services, worker_id)
        self.sampling = sampling
        self.episodes_in_flight = episodes_in_flight
        self.router = EngineRouter(len(engines))
        self.buffer = buffer
        self._executor: ThreadPoolExecutor | None = None

    def _use_threads(self) -> None:
        """Env calls get a thread each, so sleeping or slow envs never queue behind each other."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.episodes_in_flight + 2, thread_name_prefix="roll-env")
            asyncio.get_running_loop().set_default_executor(self._executor)

    def set_active_engines(self, indices: list[int]) -> None:
        """New episodes go only to these engines (the others are asleep or about to be)."""
        self.router.set_active(indices)

    async def _play(
        self, task: EpisodeTask, sampling: SamplingConfig
    ) -> tuple[Trajectory, Trajectory | None]:
        """One episode, every call of it on one engine (sticky routing; see roll.rollout.routing), and the
        imitation fallback a failed terminal training episode brings for its group (else None)."""
        engine_index = self.router.acquire()
        try:
            trajectory, fallback = await self.manager.run_episode(task, engine_index, sampling)
        finally:
            self.router.release(engine_index)
        trajectory.metadata["engine"] = engine_index
        return trajectory, fallback

    async def run(self) -> int:
        """Play episodes from the buffer until it stops; returns how many were handed in."""
        self._use_threads()
        counts = await asyncio.gather(*(self._episode_loop() for _ in range(self.episodes_in_flight)))
        return sum(counts)

    async def _episode_loop(self) -> int:
        played = 0
        while (task := await self.buffer.next_task.remote(self.worker_id)) is not None:
            try:
                trajectory, fallback = await self._play(task, self.sampling)
            except Exception as error:
                log.exception("episode %s failed; the buffer will sample it again", task)
                await self.buffer.fail.remote(self.worker_id, task, failure_reason(error))
                continue
            await self.buffer.put.remote(self.worker_id, task, trajectory, fallback)
            played += 1
        return played

    async def evaluate(self, tasks: list[EpisodeTask], sampling: SamplingConfig) -> list[Trajectory | None]:
        """Play evaluation episodes (not for training); None for an episode that failed for infra reasons."""
        self._use_threads()

        async def one(task: EpisodeTask) -> Trajectory | None:
            try:
                trajectory, _ = await self._play(task, sampling)
                return trajectory
            except Exception:
                log.exception("evaluation episode %s failed", task)
                return None

        return list(await asyncio.gather(*(one(task) for task in tasks)))


REASON_CHARS = 300


def failure_reason(error: BaseException) -> str:
    """What an episode's failure says in one line: its type and the first line of its message, shortened."""
    lines = str(error).strip().splitlines()
    reason = f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
    return reason if len(reason) <= REASON_CHARS else reason[: REASON_CHARS - 1] + "…"
