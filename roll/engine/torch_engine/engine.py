"""The asyncio face of the torch engine: accepts requests, runs the decode loop, and routes tokens back.

Model work runs on one worker thread (torch releases the GIL), so the event loop stays free to serve HTTP
while a step computes. Commands collected on the event loop are handed to the core between steps, which is
where requests join, aborts land, and weights change.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from roll.engine.protocol import EngineError
from roll.engine.torch_engine.config import TorchEngineConfig
from roll.engine.torch_engine.core import Abort, Command, Control, EngineCore, Submit, TokenEvent
from roll.engine.types import Completion, EngineStats, GenerateRequest, GenerateResult, StreamDelta

if TYPE_CHECKING:
    from roll.models import LoadedModel

log = logging.getLogger(__name__)


@dataclass
class _CompletionState:
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    top_logprobs: list[list[tuple[int, float]]] = field(default_factory=list)
    text: str = ""
    finish_reason: str | None = None


@dataclass
class _Pending:
    """A submitted request as the event loop sees it."""

    request: GenerateRequest
    submitted: float
    result: asyncio.Future[GenerateResult]
    deltas: asyncio.Queue[StreamDelta | None] | None
    completions: list[_CompletionState]
    first_token: float | None = None
    weight_version: int = 0


class TorchEngine:
    """Continuous-batching inference on a transformers causal LM, on CPU or one GPU (where the model is)."""

    def __init__(self, loaded: LoadedModel, config: TorchEngineConfig | None = None) -> None:
        self.config = config or TorchEngineConfig()
        if self.config.num_threads is not None:
            torch.set_num_threads(self.config.num_threads)
        self.max_context = loaded.max_context
        self._core = EngineCore(loaded.model, loaded.tokenizer, self.config, loaded.max_context)
        self._pending: dict[str, _Pending] = {}
        self._inbox: list[Command] = []
        self._tickets: dict[int, asyncio.Future[None]] = {}
        self._next_ticket = 0
        self._finished = 0
        self._wakeup: asyncio.Event | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._executor: ThreadPoolExecutor | None = None

    @property
    def weight_version(self) -> int:
        return self._core.weight_version

    async def start(self) -> None:
        if self._loop_task is not None:
            return
        self._wakeup = asyncio.Event()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="roll-engine")
        self._loop_task = asyncio.create_task(self._run(), name="roll-engine-loop")

    async def shutdown(self) -> None:
        if self._loop_task is None:
            return
        self._loop_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._loop_task
        self._loop_task = None
        assert self._executor is not None
        self._executor.shutdown(wait=True)
        self._executor = None
        for request_id in list(self._pending):
            self._fail(request_id, EngineError("the engine shut down before this request finished"))
        for future in self._tickets.values():
            if not future.done():
                future.set_exception(EngineError("the engine shut down before this operation ran"))
        self._tickets.clear()
        self._core.fail_all()

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        pending = self._submit(request, streaming=False)
        try:
            return await asyncio.shield(pending.result)
        except asyncio.CancelledError:
            await self.abort(request.request_id)
            raise

    async def stream(self, request: GenerateRequest) -> AsyncIterator[StreamDelta]:
        pending = self._submit(request, streaming=True)
        assert pending.deltas is not None
        try:
            while (delta := await pending.deltas.get()) is not None:
                yield delta
            pending.result.result()  # raises the engine's error, if the request failed
        finally:
            if request.request_id in self._pending:
                await self.abort(request.request_id)

    async def abort(self, request_id: str) -> None:
        if request_id in self._pending:
            self._send(Abort(request_id))

    async def update_weights(self, weights: Mapping[str, torch.Tensor] | Path, version: int) -> None:
        await self._control(Control("update_weights", 0, weights=weights, version=version))

    async def sleep(self) -> None:
        await self._control(Control("sleep", 0))

    async def wake(self) -> None:
        await self._control(Control("wake", 0))

    def stats(self) -> EngineStats:
        return self._core.stats().model_copy(update={"requests_finished": self._finished})

    def _require_started(self) -> None:
        if self._loop_task is None or self._loop_task.done():
            raise EngineError("the engine is not running: await engine.start() first")

    def _send(self, command: Command) -> None:
        self._inbox.append(command)
        assert self._wakeup is not None
        self._wakeup.set()

    def _submit(self, request: GenerateRequest, streaming: bool) -> _Pending:
        self._require_started()
        if request.request_id in self._pending:
            raise EngineError(f"request id {request.request_id!r} is already running: use a unique id")
        if len(request.prompt_token_ids) >= self.max_context:
            raise EngineError(
                f"the prompt has {len(request.prompt_token_ids)} tokens but the model's context is "
                f"{self.max_context}: shorten the prompt"
            )
        if request.params.n > self.config.max_batch_size:
            raise EngineError(
                f"n={request.params.n} exceeds the engine's max_batch_size={self.config.max_batch_size}: "
                "ask for fewer completions or raise max_batch_size"
            )
        pending = _Pending(
            request=request,
            submitted=time.perf_counter(),
            result=asyncio.get_running_loop().create_future(),
            deltas=asyncio.Queue() if streaming else None,
            completions=[_CompletionState() for _ in range(request.params.n)],
        )
        self._pending[request.request_id] = pending
        self._send(Submit(request))
        return pending

    async def _control(self, command: Control) -> None:
        self._require_started()
        command.ticket = self._next_ticket
        self._next_ticket += 1
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._tickets[command.ticket] = future
        self._send(command)
        await future

    async def _run(self) -> None:
        assert self._wakeup is not None
        loop = asyncio.get_running_loop()
        while True:
            if not self._inbox and not self._core.has_work():
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            commands, self._inbox = self._inbox, []
            try:
                output = await loop.run_in_executor(self._executor, self._core.step, commands)
            except Exception as error:
                log.exception("engine step failed; failing every request in flight")
                for request_id in self._core.fail_all():
                    self._fail(request_id, EngineError(f"the engine step failed: {error!r}"))
                continue
            for event in output.events:
                self._deliver(event)
            for ticket, error in output.acks:
                future = self._tickets.pop(ticket)
                if error is None:
                    future.set_result(None)
                else:
                    future.set_exception(error)

    def _deliver(self, event: TokenEvent) -> None:
        pending = self._pending.get(event.request_id)
        if pending is None:
            return
        if pending.first_token is None and event.token_ids:
            pending.first_token = time.perf_counter()
        pending.weight_version = event.weight_version
        state = pending.completions[event.index]
        state.token_ids.extend(event.token_ids)
        state.logprobs.extend(event.logprobs)
        if event.top_logprobs is not None:
            state.top_logprobs.extend(event.top_logprobs)
        state.text += event.text
        state.finish_reason = event.finish_reason
        if pending.deltas is not None:
            pending.deltas.put_nowait(
                StreamDelta(
                    index=event.index,
                    token_ids=event.token_ids,
                    logprobs=event.logprobs,
                    top_logprobs=event.top_logprobs,
                    text=event.text,
                    finish_reason=event.finish_reason,
                    weight_version=event.weight_version,
                )
            )
        if all(c.finish_reason is not None for c in pending.completions):
            self._complete(pending)

    def _complete(self, pending: _Pending) -> None:
        request = pending.request
        del self._pending[request.request_id]
        self._finished += 1
        now = time.perf_counter()
        wants_top = request.params.top_logprobs > 0
        result = GenerateResult(
            request_id=request.request_id,
            prompt_token_ids=request.prompt_token_ids,
            completions=[
                Completion(
                    index=index,
                    token_ids=c.token_ids,
                    logprobs=c.logprobs,
                    top_logprobs=c.top_logprobs if wants_top else None,
                    text=c.text,
                    finish_reason=c.finish_reason,  # type: ignore[arg-type]
                )
                for index, c in enumerate(pending.completions)
            ],
            weight_version=pending.weight_version,
            ttft_s=(pending.first_token or now) - pending.submitted,
            latency_s=now - pending.submitted,
        )
        pending.result.set_result(result)
        if pending.deltas is not None:
            pending.deltas.put_nowait(None)

    def _fail(self, request_id: str, error: Exception) -> None:
        pending = self._pending.pop(request_id, None)
        if pending is None:
            return
        if not pending.result.done():
            pending.result.set_exception(error)
        if pending.deltas is not None:
            pending.deltas.put_nowait(None)
