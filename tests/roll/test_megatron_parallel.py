"""builtin:tiny-qwen3-moe in megatron-core over several CPU processes (gloo) with tensor (and sequence),
expert or pipeline parallelism: each rank loads its shard, the packed forward matches transformers, the
weights gathered from the shards are the checkpoint's exactly, and (without pipeline stages) the IPA loss
gradients reduced by megatron-core equal transformers'. Under TP 2 x EP 2 the ranks also sync their weights
to an engine rank over a weights group (gloo standing in for NCCL): it receives them as SGLang does and holds
the checkpoint's weights exactly."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from roll.algo.config import IPALossConfig
from roll.algo.losses import build_loss
from roll.models import LoadedModel, load_model
from roll.models.layout import to_transformers_layout
from roll.trainer.forward import packed_logprobs
from roll.trainer.megatron.mapping import ModelShape
from roll.trainer.megatron.weight_sync import weight_specs

WORKER = Path(__file__).with_name("test_megatron_worker.py")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("tensor", "expert", "pipeline", "sync"), [(2, 1, 1, False), (1, 1, 2, False), (2, 2, 1, True)]
)
def test_parallel_layouts_match_transformers(
    tensor: int, expert: int, pipeline: int, sync: bool, tiny_moe: LoadedModel, tmp_path: Path
) -> None:
    from tests.roll.test_megatron_worker import sample_batch

    out = tmp_path / "result.pt"
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(tensor * expert * pipeline),
        "--master-addr", "127.0.0.1", "--master-port", str(_free_port()),
        str(WORKER), str(tensor), str(expert), str(pipeline), str(out),
    ]  # fmt: skip
    receiver = None
    if sync:
        port = _free_port()
        command.append(str(port))
        specs = weight_specs(
            tiny_moe.path, ModelShape.from_hf(tiny_moe.model.config.to_dict()), torch.float32
        )
        (tmp_path / "specs.json").write_text(json.dumps([vars(s) for s in specs]))
        receiver = subprocess.Popen(
            [sys.executable, str(WORKER), "receive", str(port), str(tmp_path / "specs.json"),
             str(tmp_path / "received.pt")],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    finally:
        if receiver is not None:
            try:
                receiver_log = receiver.communicate(timeout=60)[0]
            except subprocess.TimeoutExpired:
                receiver.kill()
                receiver_log = receiver.communicate()[0]
    assert result.returncode == 0, result.stderr[-4000:]
    got = torch.load(out, weights_only=False)
    if receiver is not None:
        assert receiver.returncode == 0, receiver_log[-4000:]
        assert got["synced"] == 0  # the version sent: no step taken yet
        received = torch.load(tmp_path / "received.pt", weights_only=False)
        assert received["buckets"] > 1  # the engine's buckets differ from the sender's; order is what matters
        assert [(n, t.dtype, tuple(t.shape)) for n, t in received["weights"].items()] == [
            (s.name, torch.float32, s.shape) for s in specs
        ]
        engine_state = to_transformers_layout(
            received["weights"], ModelShape.from_hf(tiny_moe.model.config.to_dict()).num_experts
        )
        assert sorted(engine_state) == sorted(tiny_moe.model.state_dict())
        for name, value in tiny_moe.model.state_dict().items():
            assert torch.equal(engine_state[name], value), name

    batch = sample_batch()
    with torch.no_grad():
        expected, _ = packed_logprobs(tiny_moe.model, batch, torch.device("cpu"))
    torch.testing.assert_close(got["logprobs"], expected, atol=1e-5, rtol=0)
    reference = tiny_moe.model.state_dict()
    assert sorted(got["state"]) == sorted(reference)
    for name, tensor_value in reference.items():
        assert torch.equal(got["state"][name], tensor_value), name
    if pipeline > 1:
        assert got["grads"] is None
        return
    model = load_model("builtin:tiny-qwen3-moe").model.train()
    loss = build_loss(IPALossConfig())
    prepared = loss.prepare(batch)
    logprobs, entropy = packed_logprobs(model, prepared, torch.device("cpu"), with_entropy=True)
    loss(prepared, logprobs, logprobs.detach(), entropy).loss.backward()
    for name, param in model.named_parameters():
        scale = float(param.grad.abs().max())
        assert scale > 0, f"{name} got no gradient"
        torch.testing.assert_close(got["grads"][name], param.grad, atol=1e-5 * scale, rtol=1e-4, msg=name)
