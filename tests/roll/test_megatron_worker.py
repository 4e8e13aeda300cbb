"""Worker of test_megatron_parallel, and the CPU redirection the Megatron tests share. Not a test module.

Run by torch.distributed.run (gloo, CPU) with `TP EP PP OUT [WEIGHT_PORT]`: builds builtin:tiny-qwen3-moe in
megatron-core under that layout (sequence parallel when TP > 1), loads each rank's shard from the checkpoint,
runs one packed forward (stages hand the hidden states on by send/recv) and gathers the weights back into HF
names. Without pipeline parallelism it also back-propagates the IPA loss in training mode and reduces the
gradients as megatron-core's schedule does after its last micro-batch (`finalize_model_grads`), then gathers
them like the weights. Rank 0 writes logprobs, weights and gradients (transformers layout) to OUT. With
WEIGHT_PORT the ranks then sync the weights to one engine rank over a weights group (gloo for NCCL).

Run as `python test_megatron_worker.py receive PORT SPECS OUT` it is that engine rank: it joins the group as
rank 1 and receives the tensors listed in SPECS (JSON) as SGLang's `update_weights_from_distributed` does,
in buckets of its own size (one empty tensor and one broadcast from rank 0 per spec), then saves them to OUT.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch


@contextlib.contextmanager
def megatron_on_cpu() -> Iterator[None]:
    """megatron-core 0.16 reaches CUDA in a CPU forward in two places: `torch.cuda.current_device()` to place
    RoPE frequencies and router weights, and the CUDA RNG tracker's fork around attention dropout. Point the
    first at the CPU and make the fork a no-op (every model here has dropout 0). The computation itself is
    megatron-core's own."""
    import megatron.core.tensor_parallel.random as megatron_random

    class CpuRngTracker(megatron_random.CudaRNGStatesTracker):
        @contextlib.contextmanager
        def fork(self, name: str = "") -> Iterator[None]:
            yield

    with pytest_free_patch() as patch:
        patch(torch.cuda, "current_device", lambda: "cpu")
        patch(megatron_random, "_CUDA_RNG_STATE_TRACKER", CpuRngTracker())
        patch(megatron_random, "_CUDA_RNG_STATE_TRACKER_INITIALIZED", True)
        yield


@contextlib.contextmanager
def pytest_free_patch() -> Iterator:
    """setattr that is undone on exit (the worker runs without pytest)."""
    undo: list[tuple[object, str, object]] = []

    def patch(owner: object, name: str, value: object) -> None:
        undo.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)

    try:
        yield patch
    finally:
        for owner, name, value in reversed(undo):
            setattr(owner, name, value)


def sample_batch():
    """Three one-chunk trajectories and one two-chunk trajectory over the SmolLM2 vocabulary."""
    from roll.trainer.packing import pack_trajectories
    from roll.types import Chunk, Trajectory

    gen = torch.Generator().manual_seed(0)

    def ids(n: int) -> list[int]:
        return torch.randint(1, 49000, (n,), generator=gen).tolist()

    trajectories = []
    for i in range(3):
        chunk = Chunk(context_ids=ids(5 + i), output_ids=ids(4), output_logprobs=[-1.0] * 4)
        trajectories.append(Trajectory(chunks=[chunk], reward=float(i % 2), group_id="g0"))
    first = Chunk(context_ids=ids(6), output_ids=ids(3), output_logprobs=[-2.0] * 3)
    second = Chunk(
        context_ids=first.context_ids + first.output_ids + ids(2),
        output_ids=ids(5),
        output_logprobs=[-1.5] * 5,
    )
    trajectories.append(Trajectory(chunks=[first, second], reward=1.0, group_id="g1"))
    return pack_trajectories(trajectories)


def pipeline_forward(model: torch.nn.Module, inputs, device: torch.device) -> torch.Tensor | None:
    """Logits on the last stage (None elsewhere); hidden states go stage to stage by send/recv."""
    import torch.distributed as dist
    from megatron.core import parallel_state as ps

    inner = getattr(model, "module", model)
    if not ps.is_pipeline_first_stage():
        length = inputs.input_ids.shape[1]
        hidden = torch.empty(length, 1, inner.config.hidden_size, device=device)
        dist.recv(hidden, src=ps.get_pipeline_model_parallel_prev_rank())
        inner.set_input_tensor(hidden)
    output = model(inputs.input_ids, inputs.position_ids, None, packed_seq_params=inputs.packed_seq_params)
    if not ps.is_pipeline_last_stage():
        dist.send(output.contiguous(), dst=ps.get_pipeline_model_parallel_next_rank())
        return None
    return output


def ipa_gradients(backend, batch) -> dict[str, torch.Tensor]:
    """The IPA loss's gradients, reduced over ranks by megatron-core and gathered into transformers names."""
    from megatron.core.distributed import finalize_model_grads

    from roll.algo.config import IPALossConfig
    from roll.algo.losses import build_loss
    from roll.models.layout import to_transformers_layout
    from roll.trainer.megatron.forward import packed_inputs, token_logprobs

    loss = build_loss(IPALossConfig())
    prepared = loss.prepare(batch)
    backend.model.train()
    backend.model.zero_grad_buffer()
    inputs = packed_inputs(prepared, 48, torch.device("cpu"))
    logits = backend.model(
        inputs.input_ids, inputs.position_ids, None, packed_seq_params=inputs.packed_seq_params
    )
    logprobs, entropy = token_logprobs(logits, prepared, backend.shape.vocab_size, True)
    loss(prepared, logprobs, logprobs.detach(), entropy).loss.backward()
    finalize_model_grads([backend.model])
    return to_transformers_layout(gathered_gradients(backend), backend.shape.num_experts)


def gathered_gradients(backend: Any) -> dict[str, torch.Tensor]:
    """The accumulated gradients in Hugging Face names: they travel the weights' gather path, swapped into
    the parameters for the gather."""
    from roll.trainer.megatron.weights import gather_hf_buckets, local_parameters

    params = local_parameters(backend.model)
    weights = {name: p.data for name, p in params.items()}
    for p in params.values():
        p.data = p.main_grad.to(p.dtype)
    try:
        return {name: t for bucket in gather_hf_buckets(backend.model, backend.shape) for name, t in bucket}
    finally:
        for name, p in params.items():
            p.data = weights[name]


RECEIVER_BUCKET_BYTES = 16 * 1024


def receive(port: int, specs_file: str, out: str) -> None:
    import json

    import torch.distributed as dist

    from roll.engine.sglang.translate import buckets_by_bytes, distributed_update_kwargs
    from roll.trainer.megatron.weight_sync import init_weight_group
    from roll.types import WEIGHT_GROUP, TensorSpec

    specs = [
        TensorSpec(s["name"], s["dtype"], tuple(s["shape"])) for s in json.loads(Path(specs_file).read_text())
    ]
    group = init_weight_group("127.0.0.1", port, 1, 2, backend="gloo")
    by_name = {s.name: s for s in specs}
    sizes = [(s.name, getattr(torch, s.dtype).itemsize * torch.Size(s.shape).numel()) for s in specs]
    received: dict[str, torch.Tensor] = {}
    buckets = buckets_by_bytes(sizes, RECEIVER_BUCKET_BYTES)
    for number, names in enumerate(buckets):
        request = distributed_update_kwargs(
            [by_name[n] for n in names], WEIGHT_GROUP, flush_cache=number == len(buckets) - 1
        )
        handles = []
        for name, dtype, shape in zip(request["names"], request["dtypes"], request["shapes"], strict=True):
            received[name] = torch.empty(shape, dtype=getattr(torch, dtype))
            handles.append(dist.broadcast(received[name], src=0, group=group, async_op=True))
        for handle in handles:
            handle.wait()
    torch.save({"weights": received, "buckets": len(buckets)}, out)


def main() -> None:
    import torch.distributed as dist

    if sys.argv[1] == "receive":
        receive(int(sys.argv[2]), sys.argv[3], sys.argv[4])
        return
    tensor, expert, pipeline, out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    weight_port = int(sys.argv[5]) if len(sys.argv) > 5 else None
    dist.init_process_group("gloo")
    with megatron_on_cpu():
        from megatron.core import parallel_state as ps

        from roll.trainer.megatron.backend import MegatronBackend
        from roll.trainer.megatron.config import MegatronBackendConfig
        from roll.trainer.megatron.forward import packed_inputs, token_logprobs

        config = MegatronBackendConfig(
            dtype="float32",
            moe_token_dispatcher="allgather",
            # All-reduced gradients on every rank (the distributed optimizer's reduce-scatter leaves each rank
            # only its own shard reduced, and megatron-core builds that optimizer on CUDA only anyway).
            distributed_optimizer=False,
            tensor_parallel_size=tensor,
            expert_parallel_size=expert,
            pipeline_parallel_size=pipeline,
            sequence_parallel=tensor > 1,
        )
        ps.initialize_model_parallel(
            tensor_model_parallel_size=tensor,
            pipeline_model_parallel_size=pipeline,
            expert_model_parallel_size=expert,
        )
        cpu = torch.device("cpu")
        backend = MegatronBackend.__new__(MegatronBackend)
        backend._setup_model(config, cpu)
        batch = sample_batch()
        backend.model.eval()
        with torch.no_grad():
            logits = pipeline_forward(backend.model, packed_inputs(batch, 48, cpu), cpu)
            logprobs = None
            if logits is not None:
                logprobs, _ = token_logprobs(logits, batch, backend.shape.vocab_size, False)
            state = backend.state_dict_for_inference().state_dict
        grads = ipa_gradients(backend, batch) if pipeline == 1 else None
        reports = [None] * dist.get_world_size()
        dist.all_gather_object(reports, logprobs)
        synced = None
        if weight_port is not None:
            backend.join_weight_group("127.0.0.1", weight_port, world_size=2, backend="gloo")
            synced = backend.broadcast_weights(bucket_bytes=RECEIVER_BUCKET_BYTES * 4)
        if dist.get_rank() == 0:
            logprobs = next(r for r in reports if r is not None)
            torch.save({"logprobs": logprobs, "state": state, "grads": grads, "synced": synced}, out)
        ps.destroy_model_parallel()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
