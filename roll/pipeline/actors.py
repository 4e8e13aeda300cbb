"""The trainer and engine roles as Ray actors (plain classes here; `cluster.py` makes them actors)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from roll.engine.types import EngineStats, GenerateRequest, GenerateResult
from roll.trainer.select import build_backend

if TYPE_CHECKING:
    import torch

    from roll.algo.config import LossConfig
    from roll.engine.protocol import InferenceEngine
    from roll.pipeline.config import EngineConfig
    from roll.trainer.select import TrainerConfig
    from roll.types import Trajectory


def build_engine(model: str, config: EngineConfig, base_gpu_id: int) -> InferenceEngine:
    """The inference engine `engines.engine.type` names; sglang is imported only when asked for."""
    if config.type == "sglang":
        from roll.engine.sglang import SGLangEngine
        from roll.models import resolve_model_path

        return SGLangEngine(resolve_model_path(model), config, base_gpu_id=base_gpu_id)
    from roll.engine.torch_engine import TorchEngine
    from roll.models import load_model

    return TorchEngine(load_model(model), config)


class TrainerActor:
    """One train backend (torch or megatron) and its loss; trains on trajectories, hands out weights."""

    def __init__(self, config: TrainerConfig, loss: LossConfig, threads: int | None) -> None:
        import torch

        from roll.algo.losses import build_loss

        if threads is not None:
            torch.set_num_threads(threads)
        self.backend = build_backend(config)
        self.loss = build_loss(loss)

    def train_step(self, trajectories: list[Trajectory]) -> dict[str, float]:
        from roll.types import pack_trajectories

        return self.backend.train_step(pack_trajectories(trajectories), self.loss)

    def weights(self) -> dict[str, torch.Tensor]:
        return self.backend.state_dict_for_inference().state_dict

    def version(self) -> int:
        return self.backend.version

    def save(self, directory: str) -> None:
        self.backend.save(Path(directory))

    def load(self, directory: str) -> int:
        self.backend.load(Path(directory))
        return self.backend.step

    def export_hf(self, directory: str) -> None:
        self.backend.export_hf(Path(directory))


class EngineActor:
    """An inference engine behind a gate that lets weight updates land between requests.

    At an update the gate closes (new requests wait); then requests in flight either finish on the old
    weights ("finish") or are aborted ("abort", their callers generate them again); then the new weights
    load and the gate opens. So every result comes from exactly one weight version.
    """

    def __init__(
        self, model_path: str, config: EngineConfig, threads: int | None, base_gpu_id: int = 0
    ) -> None:
        import torch

        if threads is not None:
            torch.set_num_threads(threads)
        self.engine = build_engine(model_path, config, base_gpu_id)
        self._open = asyncio.Event()
        self._drained = asyncio.Event()
        self._in_flight: set[str] = set()

    async def start(self) -> None:
        await self.engine.start()
        self._drained.set()
        self._open.set()

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        await self._open.wait()
        self._in_flight.add(request.request_id)
        self._drained.clear()
        try:
            return await self.engine.generate(request)
        finally:
            self._in_flight.discard(request.request_id)
            if not self._in_flight:
                self._drained.set()

    async def update_weights(
        self, weights: dict[str, torch.Tensor] | str, version: int, mode: Literal["finish", "abort"]
    ) -> int:
        self._open.clear()
        try:
            if mode == "abort":
                for request_id in list(self._in_flight):
                    await self.engine.abort(request_id)
            await self._drained.wait()
            source = Path(weights) if isinstance(weights, str) else weights
            await self.engine.update_weights(source, version)
        finally:
            self._open.set()
        return self.engine.weight_version

    async def sleep(self) -> None:
        await self.engine.sleep()

    async def wake(self) -> None:
        await self.engine.wake()

    def stats(self) -> EngineStats:
        return self.engine.stats()
