"""The trainer group: `resources.trainer_ranks` trainer actors that form one torch.distributed process group.

Ray places the actors; ranks are then numbered node by node, and rank 0 picks a free port on its node for
the group's store (127.0.0.1 when every rank runs on one machine, else rank 0's node address). Every rank
joins the group (gloo on CPU, nccl on CUDA, with the torchrun variables set for backends that read them)
and builds the same backend.

Every call the driver makes goes to all ranks at once, in the same order, because each one runs collectives
inside the backend. Every rank gets the same full batch: the backend deals micro-batches to ranks and scales
their losses so the update equals one process's (TorchBackend with FSDP2, Megatron's data parallel ranks);
the loss's global normalisers are computed from the whole batch on every rank. Results come from rank 0:
metrics, logprobs and the gathered full weights. With one rank nothing is initialised: the backend trains
alone exactly as a single process does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import ray

from roll.pipeline.actors import TrainerActor
from roll.trainer.distributed import Rendezvous

if TYPE_CHECKING:
    import torch

    from roll.algo.config import LossConfig
    from roll.pipeline.config import ResourcesConfig
    from roll.trainer.protocol import TrainerConfig
    from roll.types import TensorSpec, Trajectory

LOOPBACK = "127.0.0.1"
ECHO_WAIT_S = 2.0  # after a rank's error, how long to look for a dead rank behind it


def process_group_backend(config: TrainerConfig) -> Literal["gloo", "nccl"]:
    """nccl when the backend trains on CUDA (megatron always does), gloo on CPU."""
    if config.type == "megatron" or config.device.startswith("cuda"):
        return "nccl"
    return "gloo"


def rendezvous_for(node_ips: list[str], port: int, backend: Literal["gloo", "nccl"]) -> list[Rendezvous]:
    """Each rank's rendezvous, given the node every rank runs on (ranks of one node consecutive, as tensor
    parallel groups want them) and the free port on rank 0's node."""
    master = LOOPBACK if len(set(node_ips)) == 1 else node_ips[0]
    return [
        Rendezvous(
            rank=rank,
            world_size=len(node_ips),
            local_rank=node_ips[:rank].count(ip),
            master_addr=master,
            master_port=port,
            backend=backend,
        )
        for rank, ip in enumerate(node_ips)
    ]


def by_node(node_ips: list[str]) -> list[int]:
    """Actor indices in rank order: grouped by node (nodes in order of first appearance), stable within."""
    nodes = list(dict.fromkeys(node_ips))
    return sorted(range(len(node_ips)), key=lambda i: (nodes.index(node_ips[i]), i))


class RankLost(RuntimeError):
    """A member of a process group (a trainer rank, an engine in the weights group) died: the group cannot
    go on without it."""


def all_ranks(refs: list[ray.ObjectRef], names: list[str] | None = None) -> list[Any]:
    """Every member's result (`names`: who made each call; default trainer ranks in order). An error is
    raised as soon as one arrives (the others may be stuck in a collective waiting for the failed member);
    a dead member is named first, since the errors its peers then raise (a closed connection) are only its
    echo."""
    names = names or [f"trainer rank {rank} of {len(refs)}" for rank in range(len(refs))]
    pending = list(refs)
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        try:
            ray.get(done)
        except ray.exceptions.RayError as error:
            echoes, _ = ray.wait(pending, num_returns=len(pending), timeout=ECHO_WAIT_S)
            for ref in [*done, *echoes]:
                try:
                    ray.get(ref)
                except ray.exceptions.RayActorError as lost:
                    raise RankLost(
                        f"{names[refs.index(ref)]} died ({type(lost).__name__}, the cause is below); a "
                        "process group cannot take a new member, so restart the run with resume=true to "
                        "continue from its last checkpoint"
                    ) from lost
                except ray.exceptions.RayError:
                    pass
            raise error
    return ray.get(refs)


class TrainerGroup:
    """Driver-side handle of the trainer ranks; every method is one collective call on all of them."""

    def __init__(self, config: TrainerConfig, loss: LossConfig, resources: ResourcesConfig) -> None:
        actor = ray.remote(TrainerActor).options(
            num_cpus=resources.trainer_cpus, num_gpus=resources.trainer_gpus
        )
        self.handles = [actor.remote(resources.trainer_threads) for _ in range(resources.trainer_ranks)]
        if len(self.handles) == 1:
            self._started = [self.handles[0].start.remote(config, loss, None)]
            return
        node_ips = all_ranks([h.node_ip.remote() for h in self.handles])
        order = by_node(node_ips)
        self.handles = [self.handles[i] for i in order]
        port = ray.get(self.handles[0].free_port.remote())
        plan = rendezvous_for([node_ips[i] for i in order], port, process_group_backend(config))
        self._started = [h.start.remote(config, loss, r) for h, r in zip(self.handles, plan, strict=True)]

    def ready(self) -> None:
        """Wait until every rank has joined the group and built its backend (raises a rank's error)."""
        all_ranks(self._started)

    def _call(self, method: str, *args: Any) -> list[Any]:
        return all_ranks([getattr(h, method).remote(*args) for h in self.handles])

    def train_step(self, trajectories: list[Trajectory]) -> dict[str, float]:
        """One optimizer step on the batch (sent once, read by every rank); rank 0's metrics."""
        return self._call("train_step", ray.put(trajectories))[0]

    def logprobs(self, trajectories: list[Trajectory]) -> torch.Tensor:
        return self._call("logprobs", ray.put(trajectories))[0]

    def weights(self) -> tuple[ray.ObjectRef, int]:
        """A reference to the full weights (gathered by all ranks, stored by rank 0) and their version.
        Engines resolve the reference themselves, so the tensors never pass through the driver."""
        return self._call("weights")[0]

    def version(self) -> int:
        return ray.get(self.handles[0].version.remote())

    def weight_group_address(self) -> tuple[str, int]:
        """Where the weights group with the engines gets its store: rank 0's node and a free port there."""
        rank0 = self.handles[0]
        return ray.get(rank0.node_ip.remote()), ray.get(rank0.free_port.remote())

    def rank_names(self) -> list[str]:
        return [f"trainer rank {rank} of {len(self.handles)}" for rank in range(len(self.handles))]

    def join_weight_group(self, address: str, port: int, world_size: int) -> list[ray.ObjectRef]:
        """Start every rank's part in forming the weights group (rank 0 is its rank 0); wait on the calls
        together with the engines' joins, which run at the same time."""
        return [h.join_weight_group.remote(address, port, world_size) for h in self.handles]

    def weight_specs(self) -> list[TensorSpec]:
        """Names, dtypes and shapes of what `broadcast_weights` sends, in order."""
        return ray.get(self.handles[0].weight_specs.remote())

    def broadcast_weights(self) -> list[ray.ObjectRef]:
        """Start the weights' broadcast (gathered by all ranks, sent by rank 0); wait on the calls together
        with the engines' receives."""
        return [h.broadcast_weights.remote() for h in self.handles]

    def save(self, directory: str) -> None:
        """A checkpoint as the backend writes it (torch: full state from rank 0 plus each rank's RNG;
        megatron: one shard per rank), so `directory` must be shared by every rank's node."""
        self._call("save", directory)

    def load(self, directory: str) -> int:
        """Restore a checkpoint written by `save` with the same number of ranks; returns the step."""
        return self._call("load", directory)[0]

    def export_hf(self, directory: str) -> None:
        """A Hugging Face folder written by rank 0 (its node's disk)."""
        self._call("export_hf", directory)

    def kill(self) -> None:
        for handle in self.handles:
            ray.kill(handle)
