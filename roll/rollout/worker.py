"""A rollout worker: plays many episodes at once, each on its own, and hands them to the sample buffer.

Runs as an async Ray actor. `run()` keeps `episodes_in_flight` episodes going: each takes a task from the
buffer, plays it with the env manager of its env kind (roll.rollout.envs; GEM: generate on an engine actor
and env step in a thread, turn by turn; terminal: an iflow agent in a ROCK sandbox whose model calls go
through a proxy to the engine), and returns its trajectory, so generation, env interaction and reward are
pipelined per episode with no batch barrier. An episode that fails for infrastructure reasons goes back to
the buffer to be sampled again.

The worker's view of each engine actor is an `EngineFront`, an `InferenceEngine`: requests go to the actor
(`roll.pipeline.actors.EngineActor`); one that a weight update aborted (weight_sync: abort) is generated again
on the new weights, so every result comes from one weight version. The same front serves the GEM env manager
(its `generate`) and the terminal env manager, where `roll serve`'s chat route runs over it as a function and
the ModelProxyService (train mode) records the agent's calls through it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roll.engine.protocol import EngineError
from roll.engine.types import EngineStats, GenerateRequest, GenerateResult, SamplingParams, StreamDelta
from roll.rollout.config import SamplingConfig
from roll.rollout.envs import EnvConfig, env_kind
from roll.rollout.episode import EpisodeTask
from roll.rollout.routing import EngineRouter
from roll.types import Trajectory

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

MAX_REGENERATIONS = 8


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


class EngineFront:
    """Generates on one engine actor; `name` prefixes the request ids the actor sees (unique per worker).
    `max_context` (what `roll serve`'s app checks prompts against) is known after `load_max_context()`."""

    def __init__(self, handle: Any, name: str) -> None:
        self.handle = handle
        self.name = name
        self.max_context = 0
        self.weight_version = 0
        self._ids = itertools.count()
        self._in_flight: dict[str, str] = {}
        self._aborted: set[str] = set()
        self._finished = 0
        self._prompt_tokens = 0
        self._generated_tokens = 0

    def load_max_context(self) -> None:
        """Ask the engine actor for its context length (blocking: call it from a thread)."""
        import ray

        self.max_context = int(ray.get(self.handle.max_context.remote()))

    async def generate_ids(self, prompt_ids: list[int], params: SamplingParams) -> GenerateResult:
        """The `Generate` of the GEM env manager: one completion of `prompt_ids`."""
        request_id = f"{self.name}-{next(self._ids)}"
        return await self.generate(
            GenerateRequest(request_id=request_id, prompt_token_ids=prompt_ids, params=params)
        )

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        try:
            for attempt in range(MAX_REGENERATIONS):
                sent = request.model_copy(
                    update={"request_id": f"{self.name}-{request.request_id}-{attempt}"}
                )
                self._in_flight[request.request_id] = sent.request_id
                result: GenerateResult = await self.handle.generate.remote(sent)
                aborted = result.completions[0].finish_reason == "abort"
                if not aborted or request.request_id in self._aborted:
                    self.weight_version = max(self.weight_version, result.weight_version)
                    self._count(result)
                    return result.model_copy(update={"request_id": request.request_id})
        finally:
            self._in_flight.pop(request.request_id, None)
            self._aborted.discard(request.request_id)
        raise EngineError(
            f"request {request.request_id} was aborted {MAX_REGENERATIONS} times in a row by weight updates"
        )

    def _count(self, result: GenerateResult) -> None:
        self._finished += 1
        self._prompt_tokens += len(result.prompt_token_ids)
        self._generated_tokens += sum(len(c.token_ids) for c in result.completions)

    async def stream(self, request: GenerateRequest) -> AsyncIterator[StreamDelta]:
        """The whole completion as one delta: the engine actor answers requests whole."""
        result = await self.generate(request)
        completion = result.completions[0]
        yield StreamDelta(
            index=0,
            token_ids=completion.token_ids,
            logprobs=completion.logprobs,
            text=completion.text,
            finish_reason=completion.finish_reason,
            weight_version=result.weight_version,
        )

    async def abort(self, request_id: str) -> None:
        """The client went away: abort the request in the engine and do not generate it again."""
        sent = self._in_flight.get(request_id)
        if sent is not None:
            self._aborted.add(request_id)
            await self.handle.abort.remote(sent)

    async def start(self) -> None:
        """The engine actor was started by the pipeline."""

    async def shutdown(self) -> None:
        """The engine actor belongs to the pipeline, which stops it."""

    async def update_weights(self, weights: Mapping[str, torch.Tensor] | Path, version: int) -> None:
        raise EngineError("weights reach the engine actors from the trainer (Cluster.sync_weights), not here")

    async def sleep(self) -> None:
        raise EngineError("engines sleep through the pipeline's multiplexing, not through a rollout worker")

    async def wake(self) -> None:
        raise EngineError("engines wake through the pipeline's multiplexing, not through a rollout worker")

    def stats(self) -> EngineStats:
        """This front's own counters (what the engine did for this worker)."""
        return EngineStats(
            running=len(self._in_flight),
            waiting=0,
            weight_version=self.weight_version,
            sleeping=False,
            requests_finished=self._finished,
            prompt_tokens=self._prompt_tokens,
            prefix_cache_hit_tokens=0,
            generated_tokens=self._generated_tokens,
            decode_steps=0,
            kv_cache_bytes=0,
        )
