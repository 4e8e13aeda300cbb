"""`SGLangEngine`: the `InferenceEngine` protocol on SGLang's offline engine (GPU only, extra `gpu`).

A request's n completions run as n SGLang requests (own ids and seeds), streamed so that the time to the first
token is measured; `generate` collects the same stream. Weight updates, sleep and wake close a gate: new
requests wait, those in flight finish (or are aborted by the caller), then the change lands, so every result
comes from exactly one weight version.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roll.engine.protocol import EngineError
from roll.engine.sglang import runtime
from roll.engine.sglang.config import SGLangEngineConfig
from roll.engine.sglang.translate import (
    ORIGINAL_LOGPROB_ENV,
    StreamCursor,
    UsageCounters,
    abort_message,
    buckets_by_bytes,
    completion_rid,
    generate_kwargs,
)
from roll.engine.types import Completion, EngineStats, GenerateRequest, GenerateResult, StreamDelta
from roll.types import WEIGHT_GROUP, TensorSpec

if TYPE_CHECKING:
    import torch

# After an abort, SGLang ends the stream with an abort chunk; a version that drops the request's state instead
# would leave the stream waiting forever, so the adapter ends it itself after this long.
ABORT_GRACE_S = 30.0


def model_max_context(model_path: Path, config: SGLangEngineConfig) -> int:
    """The context the engine serves: config.context_length, else the model's max_position_embeddings."""
    if config.context_length is not None:
        return config.context_length
    hf_config = json.loads((model_path / "config.json").read_text())
    return int(hf_config["max_position_embeddings"])


class SGLangEngine:
    """Rollout on SGLang (`sglang.Engine`), driven from the caller's event loop."""

    def __init__(
        self, model_path: str | Path, config: SGLangEngineConfig | None = None, base_gpu_id: int = 0
    ) -> None:
        runtime.require_sglang()
        self.config = config or SGLangEngineConfig()
        self.base_gpu_id = base_gpu_id
        self.model_path = Path(self.config.model_path or model_path)
        self.max_context = model_max_context(self.model_path, self.config)
        self.weight_version = 0
        self._engine: Any = None
        self._open = asyncio.Event()
        self._drained = asyncio.Event()
        self._drained.set()
        self._running: dict[str, int] = {}  # request id -> completions submitted to SGLang
        self._waiting: dict[str, int] = {}  # request id -> completions held at the gate
        self._aborted: set[str] = set()
        self._pumps: dict[str, list[asyncio.Task[None]]] = {}
        self._sleeping = False
        self._usage = UsageCounters()

    async def start(self) -> None:
        if self._engine is not None:
            return
        os.environ[ORIGINAL_LOGPROB_ENV] = "1"
        self._engine = await asyncio.to_thread(
            runtime.launch, self.config.server_args(str(self.model_path), self.base_gpu_id)
        )
        self._open.set()

    async def shutdown(self) -> None:
        if self._engine is None:
            return
        for request_id in list(self._running):
            await self.abort(request_id)
        engine, self._engine = self._engine, None
        self._open.clear()
        await asyncio.to_thread(engine.shutdown)

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        submitted = time.perf_counter()
        first_token: float | None = None
        version = self.weight_version
        parts = [
            Completion(index=i, token_ids=[], logprobs=[], text="", finish_reason="abort")
            for i in range(request.params.n)
        ]
        tops: list[list[list[tuple[int, float]]]] = [[] for _ in parts]
        async for delta in self.stream(request):
            if first_token is None and delta.token_ids:
                first_token = time.perf_counter()
            version = delta.weight_version
            part = parts[delta.index]
            part.token_ids.extend(delta.token_ids)
            part.logprobs.extend(delta.logprobs)
            tops[delta.index].extend(delta.top_logprobs or [])
            part.text += delta.text
            if delta.finish_reason is not None:
                part.finish_reason = delta.finish_reason
        if request.params.top_logprobs > 0:
            for part, top in zip(parts, tops, strict=True):
                part.top_logprobs = top
        now = time.perf_counter()
        return GenerateResult(
            request_id=request.request_id,
            prompt_token_ids=request.prompt_token_ids,
            completions=parts,
            weight_version=version,
            ttft_s=(first_token or now) - submitted,
            latency_s=now - submitted,
        )

    async def stream(self, request: GenerateRequest) -> AsyncIterator[StreamDelta]:
        self._require_started()
        request_id, n = request.request_id, request.params.n
        if request_id in self._running or request_id in self._waiting:
            raise EngineError(f"request id {request_id!r} is already running: use a unique id")
        if len(request.prompt_token_ids) >= self.max_context:
            raise EngineError(
                f"the prompt has {len(request.prompt_token_ids)} tokens but the engine's context is "
                f"{self.max_context}: shorten the prompt"
            )
        self._waiting[request_id] = n
        try:
            await self._open.wait()
        finally:
            del self._waiting[request_id]
        self._running[request_id] = n
        self._drained.clear()
        version = self.weight_version
        queue: asyncio.Queue[StreamDelta | BaseException | None] = asyncio.Queue()
        finals: list[dict[str, Any]] = []
        tasks = [
            asyncio.create_task(self._pump(request, index, version, queue, finals)) for index in range(n)
        ]
        self._pumps[request_id] = tasks
        try:
            for _ in range(n):
                while (item := await queue.get()) is not None:
                    if isinstance(item, BaseException):
                        raise item
                    yield item
            self._usage.add(finals)
        finally:
            unfinished = [task for task in tasks if not task.done()]
            if unfinished:
                for index in range(n):
                    runtime.abort(self._engine, completion_rid(request_id, index))
            for task in unfinished:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._aborted.discard(request_id)
            del self._pumps[request_id]
            del self._running[request_id]
            if not self._running:
                self._drained.set()

    async def _pump(
        self,
        request: GenerateRequest,
        index: int,
        version: int,
        queue: asyncio.Queue[StreamDelta | BaseException | None],
        finals: list[dict[str, Any]],
    ) -> None:
        """Forward one completion's SGLang stream into the request's queue; None marks its end."""
        cursor = StreamCursor(index, top_logprobs=request.params.top_logprobs > 0)
        last: dict[str, Any] | None = None
        try:
            chunks = await self._engine.async_generate(**generate_kwargs(request, index, stream=True))
            async for chunk in chunks:
                last = chunk
                delta = cursor.delta(chunk, version)
                if delta.finish_reason == "abort" and request.request_id not in self._aborted:
                    message = abort_message(chunk["meta_info"]) or "no reason given"
                    raise EngineError(f"SGLang aborted request {request.request_id!r}: {message}")
                queue.put_nowait(delta)
            if last is not None:
                finals.append(last)
        except asyncio.CancelledError:
            if request.request_id not in self._aborted:
                raise
            # Aborted, and SGLang did not end the stream within ABORT_GRACE_S: the completion ends here.
            queue.put_nowait(
                StreamDelta(
                    index=index,
                    token_ids=[],
                    logprobs=[],
                    text="",
                    finish_reason="abort",
                    weight_version=version,
                )
            )
        except Exception as error:  # handed to the consumer, which raises it in the caller's task
            queue.put_nowait(error)
        queue.put_nowait(None)

    async def abort(self, request_id: str) -> None:
        n = self._running.get(request_id)
        if n is None or self._engine is None:
            return
        self._aborted.add(request_id)
        for index in range(n):
            runtime.abort(self._engine, completion_rid(request_id, index))
        asyncio.get_running_loop().call_later(ABORT_GRACE_S, self._end_aborted, request_id)

    def _end_aborted(self, request_id: str) -> None:
        if request_id in self._aborted:
            for task in self._pumps.get(request_id, []):
                task.cancel()

    async def update_weights(self, weights: Mapping[str, torch.Tensor] | Path, version: int) -> None:
        """New weights from a Hugging Face folder (update_weights_from_disk) or from tensors in this process
        (update_weights_from_tensor, in buckets of config.weight_update_bucket_bytes)."""
        async with self._closed_gate():
            if isinstance(weights, Path):
                await runtime.update_from_disk(self._engine, weights)
            else:
                # Trainers hand out transformers' in-memory names, where MoE experts are fused; SGLang's
                # loader takes the per-expert checkpoint names.
                from roll.models.layout import to_checkpoint_layout

                weights = to_checkpoint_layout(weights)
                sizes = [(name, t.numel() * t.element_size()) for name, t in weights.items()]
                buckets = buckets_by_bytes(sizes, self.config.weight_update_bucket_bytes)
                for number, names in enumerate(buckets):
                    named = [(name, weights[name]) for name in names]
                    last = number == len(buckets) - 1
                    await runtime.update_from_tensors(self._engine, named, self.config.tp_size, flush=last)
            self.weight_version = version

    async def join_weight_group(
        self, master_address: str, master_port: int, rank_offset: int, world_size: int, backend: str = "nccl"
    ) -> None:
        """Join the group the trainer broadcasts weights over (weight_update: distributed): the trainer is
        rank 0 (`MegatronBackend.join_weight_group`, at the same time), this engine's TP ranks are
        rank_offset .. rank_offset + tp_size - 1. NCCL needs every rank on its own GPU; gloo does not."""
        self._require_started()
        await runtime.init_weight_group(
            self._engine, master_address, master_port, rank_offset, world_size, WEIGHT_GROUP, backend
        )

    async def update_weights_from_group(self, specs: Sequence[TensorSpec], version: int) -> None:
        """Receive `specs` broadcast in this order by the trainer's rank 0 (`MegatronBackend.weight_specs` and
        `broadcast_weights`, running at the same time), in buckets of config.weight_update_bucket_bytes (the
        broadcasts match by order, whatever the sender's buckets)."""
        async with self._closed_gate():
            sizes = [(spec.name, _nbytes(spec)) for spec in specs]
            by_name = {spec.name: spec for spec in specs}
            buckets = buckets_by_bytes(sizes, self.config.weight_update_bucket_bytes)
            for number, names in enumerate(buckets):
                bucket = [by_name[name] for name in names]
                await runtime.update_from_group(
                    self._engine, bucket, WEIGHT_GROUP, flush=number == len(buckets) - 1
                )
            self.weight_version = version

    async def sleep(self) -> None:
        """Release the GPU memory (weights and KV cache) for the trainer; requests wait until wake."""
        if not self.config.enable_memory_saver:
            raise EngineError("sleep needs engines.engine.enable_memory_saver: true (SGLang's memory saver)")
        self._require_started()
        if self._sleeping:
            return
        self._open.clear()
        await self._drained.wait()
        await runtime.release_memory(self._engine)
        self._sleeping = True

    async def wake(self) -> None:
        self._require_started()
        if not self._sleeping:
            return
        await runtime.resume_memory(self._engine)
        self._sleeping = False
        self._open.set()

    async def flush_cache(self) -> None:
        """Drop SGLang's prefix cache (weight updates flush it themselves). SGLang flushes only when no
        request runs, so new requests wait and those in flight finish first."""
        async with self._closed_gate("flushing its cache"):
            await runtime.flush_cache(self._engine)

    def stats(self) -> EngineStats:
        """Counts this adapter sees; SGLang's offline API does not report decode steps or KV bytes (0)."""
        return EngineStats(
            running=sum(self._running.values()),
            waiting=sum(self._waiting.values()),
            weight_version=self.weight_version,
            sleeping=self._sleeping,
            requests_finished=self._usage.requests_finished,
            prompt_tokens=self._usage.prompt_tokens,
            prefix_cache_hit_tokens=self._usage.prefix_cache_hit_tokens,
            generated_tokens=self._usage.generated_tokens,
            decode_steps=0,
            kv_cache_bytes=0,
        )

    def _require_started(self) -> None:
        if self._engine is None:
            raise EngineError("the sglang engine is not running: await engine.start() first")

    @contextlib.asynccontextmanager
    async def _closed_gate(self, what: str = "updating its weights") -> AsyncIterator[None]:
        self._require_started()
        if self._sleeping:
            raise EngineError(f"the engine is asleep: wake it before {what}")
        self._open.clear()
        try:
            await self._drained.wait()
            yield
        finally:
            self._open.set()


def _nbytes(spec: TensorSpec) -> int:
    import torch

    count = 1
    for size in spec.shape:
        count *= size
    return count * getattr(torch, spec.dtype).itemsize
