"""A rollout worker's view of one engine actor, as an `InferenceEngine`.

Requests go to the engine actor (`roll.pipeline.actors.EngineActor`); one that a weight update aborted
(weight_sync: abort) is generated again on the new weights, so every result comes from one weight version.
The same front serves the GEM env manager (its `generate`) and the terminal env manager, where `roll serve`'s
chat route runs over it (called as a function for an agent on the host, as an app for one in the sandbox)
and the ModelProxyService (train mode) records the agent's calls through it.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roll.engine.protocol import EngineError
from roll.engine.types import EngineStats, GenerateRequest, GenerateResult, SamplingParams, StreamDelta

if TYPE_CHECKING:
    import torch

MAX_REGENERATIONS = 8


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
