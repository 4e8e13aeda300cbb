"""The interface every inference engine implements (the torch engine here, an SGLang adapter later)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from roll.engine.types import EngineStats, GenerateRequest, GenerateResult, StreamDelta

if TYPE_CHECKING:
    import torch


class EngineError(RuntimeError):
    """A request the engine cannot serve; the message says why and what to do."""


@runtime_checkable
class InferenceEngine(Protocol):
    """Generates continuations of tokenized prompts with a background decode loop.

    `start()` must be awaited before requests are submitted and `shutdown()` when done. Results carry the
    weight version that produced them; `update_weights` takes effect between two decode steps.
    """

    weight_version: int
    max_context: int

    async def start(self) -> None: ...

    async def shutdown(self) -> None: ...

    async def generate(self, request: GenerateRequest) -> GenerateResult: ...

    def stream(self, request: GenerateRequest) -> AsyncIterator[StreamDelta]: ...

    async def abort(self, request_id: str) -> None: ...

    async def update_weights(self, weights: Mapping[str, torch.Tensor] | Path, version: int) -> None: ...

    async def sleep(self) -> None: ...

    async def wake(self) -> None: ...

    def stats(self) -> EngineStats: ...
