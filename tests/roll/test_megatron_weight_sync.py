"""The trainer side of `weight_update: distributed` without megatron-core: the specs engines receive, and the
sender's checks (a real one-rank gloo weights group). The multi-rank gather, broadcast and an engine rank
receiving it are in test_megatron_parallel.py (TP 2 x EP 2)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from safetensors.torch import save_file

from roll.trainer.megatron.mapping import hf_to_megatron, megatron_to_hf
from roll.trainer.megatron.weight_sync import broadcast_buckets, init_weight_group, weight_specs
from roll.types import TensorSpec
from tests.roll.test_megatron_mapping import dense_model


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize(("kind", "tied"), [("qwen3", True), ("qwen2", False)])
def test_specs_list_every_checkpoint_tensor_in_gather_order(kind: str, tied: bool, tmp_path: Path) -> None:
    shape, state = dense_model(kind, tied)
    save_file({n: t.contiguous() for n, t in state.items()}, str(tmp_path / "model.safetensors"))
    specs = weight_specs(tmp_path, shape, torch.bfloat16)
    # The gather yields megatron_to_hf's names rule by rule: the same order, every checkpoint tensor once.
    gathered = list(megatron_to_hf(hf_to_megatron(state, shape), shape).items())
    assert [s.name for s in specs] == [name for name, _ in gathered]
    assert {s.name: s.shape for s in specs} == {n: tuple(t.shape) for n, t in state.items()}
    assert {s.dtype for s in specs} == {"bfloat16"} and ("lm_head.weight" in state) != tied


def test_specs_of_another_model_folder_are_refused(tmp_path: Path) -> None:
    shape, state = dense_model("qwen3", True)
    state.pop("model.norm.weight")
    save_file({n: t.contiguous() for n, t in state.items()}, str(tmp_path / "model.safetensors"))
    with pytest.raises(KeyError, match=r"has no tensor model\.norm\.weight"):
        weight_specs(tmp_path, shape, torch.float32)


@pytest.fixture(scope="module")
def one_rank_group():
    group = init_weight_group("127.0.0.1", _free_port(), 0, 1, backend="gloo")
    yield group
    dist.destroy_process_group(group)


def test_sender_checks_every_tensor_against_the_specs(one_rank_group) -> None:
    buckets = [[("a", torch.ones(2, 3)), ("b", torch.zeros(4))], [("c", torch.ones(1, dtype=torch.bfloat16))]]
    specs = [
        TensorSpec("a", "float32", (2, 3)),
        TensorSpec("b", "float32", (4,)),
        TensorSpec("c", "bfloat16", (1,)),
    ]
    assert broadcast_buckets(iter(buckets), specs, one_rank_group) == 3
    wrong = [specs[0], TensorSpec("b", "float32", (5,)), specs[2]]
    with pytest.raises(RuntimeError, match=r"tensor 1 is TensorSpec\(name='b'.*the engines expect .*\(5,\)"):
        broadcast_buckets(iter(buckets), wrong, one_rank_group)
    with pytest.raises(RuntimeError, match="sent 3 tensors but the engines expect 4"):
        broadcast_buckets(iter(buckets), [*specs, specs[0]], one_rank_group)
    # Ranks other than the sender only take part in the gather.
    assert broadcast_buckets(iter(buckets), wrong, None) == 0
