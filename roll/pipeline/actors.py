"""The trainer and engine roles as Ray actors (plain classes here; `cluster.py` makes them actors)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

import ray

from roll.engine.types import EngineStats, GenerateRequest, GenerateResult
from roll.pipeline.weight_sync.object_store import from_object_store, to_object_store
from roll.trainer.protocol import build_backend

if TYPE_CHECKING:
    import numpy as np
    import torch

    from roll.algo.config import LossConfig
    from roll.engine.protocol import InferenceEngine
    from roll.pipeline.config import EngineConfig
    from roll.trainer.distributed import Rendezvous
    from roll.trainer.protocol import TrainerConfig
    from roll.types import TensorSpec, Trajectory


def build_engine(model: str, config: EngineConfig, base_gpu_id: int) -> InferenceEngine:
    """The inference engine `engines.engine.type` names; sglang is imported only when asked for."""
    if config.type == "scripted":
        from roll.rollout.terminal.scripted import OracleFollower

        return OracleFollower.for_model(model, config)
    if config.type == "sglang":
        from roll.engine.sglang import SGLangEngine
        from roll.models import resolve_model_path

        return SGLangEngine(resolve_model_path(model), config, base_gpu_id=base_gpu_id)
    from roll.engine.torch_engine import TorchEngine
    from roll.models import load_model

    return TorchEngine(load_model(model), config)


@runtime_checkable
class BroadcastsWeights(Protocol):
    """A train backend that sends weights to engines over a process group of its own (Megatron's)."""

    def join_weight_group(self, master_address: str, master_port: int, world_size: int) -> None: ...

    def weight_specs(self) -> list[TensorSpec]: ...

    def broadcast_weights(self) -> int: ...


class TrainerActor:
    """One rank of the trainer group: a train backend (torch or megatron) and its loss.

    Built in two calls so the group can place rank 0 first and learn where its store listens: the actor
    starts empty, `start` joins the process group (when the group has several ranks) and builds the backend.
    Every rank receives the same full batch; the backend deals micro-batches to ranks (see TrainBackend).
    """

    def __init__(self, threads: int | None) -> None:
        import torch

        if threads is not None:
            torch.set_num_threads(threads)
        self.rank = 0

    def node_ip(self) -> str:
        return ray.util.get_node_ip_address()

    def free_port(self) -> int:
        from roll.trainer.distributed import free_port

        return free_port()

    def start(self, config: TrainerConfig, loss: LossConfig, rendezvous: Rendezvous | None) -> None:
        """Join `rendezvous`'s process group (None: train alone, as one process), then build the backend."""
        from roll.algo.losses import build_loss

        if rendezvous is not None:
            from roll.trainer.distributed import join_process_group

            join_process_group(rendezvous, cuda_device(rendezvous.local_rank))
            self.rank = rendezvous.rank
        self.backend = build_backend(config)
        self.loss = build_loss(loss)

    def train_step(self, trajectories: list[Trajectory]) -> dict[str, float]:
        from roll.trainer.packing import pack_trajectories

        return self.backend.train_step(pack_trajectories(trajectories), self.loss)

    def logprobs(self, trajectories: list[Trajectory]) -> torch.Tensor:
        from roll.trainer.packing import pack_trajectories

        return self.backend.logprobs(pack_trajectories(trajectories))

    def weights(self) -> tuple[ray.ObjectRef, int] | None:
        """On rank 0: the full weights, put in Ray's object store, and their version. The other ranks take
        part in gathering them and return None; a reference keeps the reply small on every rank."""
        weights = self.backend.state_dict_for_inference()
        if self.rank != 0:
            return None
        return ray.put(to_object_store(weights.state_dict)), weights.version

    def version(self) -> int:
        return self.backend.version

    def join_weight_group(self, master_address: str, master_port: int, world_size: int) -> None:
        """This rank's part in forming the weights group with the engines (weight_update: distributed)."""
        self._broadcaster().join_weight_group(master_address, master_port, world_size)

    def weight_specs(self) -> list[TensorSpec]:
        return self._broadcaster().weight_specs()

    def broadcast_weights(self) -> int:
        """This rank's part in sending the weights to the engines (rank 0 broadcasts); returns the version."""
        return self._broadcaster().broadcast_weights()

    def _broadcaster(self) -> BroadcastsWeights:
        if not isinstance(self.backend, BroadcastsWeights):
            raise TypeError(
                f"the {type(self.backend).__name__} train backend cannot broadcast weights to engines; "
                "set engines.engine.weight_update: tensor, or use trainer.type: megatron"
            )
        return self.backend

    def save(self, directory: str) -> None:
        self.backend.save(Path(directory))

    def load(self, directory: str) -> int:
        self.backend.load(Path(directory))
        return self.backend.step

    def export_hf(self, directory: str) -> None:
        self.backend.export_hf(Path(directory))


def cuda_device(local_rank: int) -> int | None:
    """This rank's CUDA device: the first visible one when Ray gave the actor its own GPUs, else the
    node-local rank's (ranks sharing a node's GPUs without Ray assigning them); None without CUDA."""
    import torch

    if not torch.cuda.is_available():
        return None
    return 0 if ray.get_gpu_ids() else local_rank


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

    async def abort(self, request_id: str) -> None:
        """A client hung up: end its request now (its result says finish_reason "abort")."""
        await self.engine.abort(request_id)

    def max_context(self) -> int:
        return self.engine.max_context

    async def update_weights(
        self,
        weights: dict[str, torch.Tensor | np.ndarray] | str,
        version: int,
        mode: Literal["finish", "abort"],
    ) -> int:
        """Load `weights` (a model folder, or a state `to_object_store` made) once no request runs."""
        source = Path(weights) if isinstance(weights, str) else from_object_store(weights)
        return await self._between_requests(mode, lambda: self.engine.update_weights(source, version))

    async def join_weight_group(
        self, master_address: str, master_port: int, rank_offset: int, world_size: int
    ) -> None:
        """Join the trainer's weights group (weight_update: distributed; SGLang engines only)."""
        await self.engine.join_weight_group(master_address, master_port, rank_offset, world_size)

    async def update_weights_from_group(
        self, specs: list[TensorSpec], version: int, mode: Literal["finish", "abort"]
    ) -> int:
        """Receive the weights trainer rank 0 broadcasts meanwhile (weight_update: distributed)."""
        return await self._between_requests(
            mode, lambda: self.engine.update_weights_from_group(specs, version)
        )

    async def _between_requests(
        self, mode: Literal["finish", "abort"], update: Callable[[], Awaitable[None]]
    ) -> int:
        self._open.clear()
        try:
            if mode == "abort":
                for request_id in list(self._in_flight):
                    await self.engine.abort(request_id)
            await self._drained.wait()
            await update()
        finally:
            self._open.set()
        return self.engine.weight_version

    async def sleep(self) -> None:
        await self.engine.sleep()

    async def wake(self) -> None:
        await self.engine.wake()

    def stats(self) -> EngineStats:
        return self.engine.stats()
