"""Context parallelism's batch split and gather (roll.trainer.megatron.context_parallel): each rank's share is
Transformer Engine's THD partition (chunks r and 2cp-1-r of every sequence padded to 2cp), the shares put
back in token order are an exact round trip, the per-rank positions are those megatron-core's RoPE gives
each rank, and over two gloo processes the logprobs and entropies of the CP path (its collective gather
included, and its gradients) equal the path without CP.

Over the same two ranks (test_megatron_cp_worker), builtin:tiny-qwen3-moe runs in megatron-core with
context_parallel_size 2 end to end (the shares as inputs, megatron-core's THD RoPE under CP, the gathered
logprobs, and the IPA loss's gradients as megatron-core's schedule scales and reduces them) and matches
transformers. Transformer Engine's attention, which does the CP exchange on GPUs, needs CUDA; there
`AllGatherContextAttention` stands in for it.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from roll.trainer.megatron.context_parallel import (
    partition_index,
    row_length,
    shard_for_rank,
    unshard_token_values,
)
from tests.roll.test_megatron_cp_worker import packed_micro_batch, shards_of
from tests.roll.test_megatron_worker import sample_batch

WORKER = Path(__file__).with_name("test_megatron_cp_worker.py")


def test_one_sequence_of_eight_tokens_over_two_ranks() -> None:
    packed = packed_micro_batch([8])
    packed["input_ids"] = torch.arange(100, 108)
    length, (first, second) = shards_of(packed, cp=2)
    assert length == 8
    assert first.input_ids.tolist() == [100, 101, 106, 107]
    assert second.input_ids.tolist() == [102, 103, 104, 105]
    assert first.position_ids.tolist() == [0, 1, 6, 7] and second.position_ids.tolist() == [2, 3, 4, 5]
    # position p predicts token p + 1; the last position predicts nothing
    assert first.labels.tolist() == [101, 102, 107, 0] and second.labels.tolist() == [103, 104, 105, 106]
    assert first.cu_seqlens.tolist() == [0, 8] and first.max_seqlen == 8


def test_two_sequences_padded_to_multiples_of_four() -> None:
    """Lengths 3 and 5 under cp=2: padded to 4 and 8; rank 0 keeps chunk 0 and 3 of each sequence."""
    assert partition_index(torch.tensor([4, 8]), 2, 0).tolist() == [0, 3, 4, 5, 10, 11]
    assert partition_index(torch.tensor([4, 8]), 2, 1).tolist() == [1, 2, 6, 7, 8, 9]
    packed = packed_micro_batch([3, 5])
    length, (first, second) = shards_of(packed, cp=2)
    assert length == 12 and first.cu_seqlens.tolist() == [0, 4, 12]
    ids = packed["input_ids"].tolist()
    # padding (id 0) ends each sequence: [a0 a1 a2 0 | b0 .. b4 0 0 0]
    assert first.input_ids.tolist() == [ids[0], 0, ids[3], ids[4], 0, 0]
    assert second.input_ids.tolist() == [ids[1], ids[2], ids[5], ids[6], ids[7], 0]
    assert first.position_ids.tolist() == [0, 3, 0, 1, 6, 7]
    with pytest.raises(ValueError, match="multiple of 2 x cp = 4"):
        partition_index(torch.tensor([4, 6]), 2, 0)


@pytest.mark.parametrize("cp", [2, 4])
@pytest.mark.parametrize(
    ("seq_lens", "tp"), [([8], 1), ([3, 5], 1), ([1, 17, 4, 9], 2), ([31, 2, 2, 12, 6], 1), ([16, 16], 2)]
)
def test_split_and_unshard_is_an_exact_round_trip(seq_lens: list[int], tp: int, cp: int) -> None:
    packed = packed_micro_batch(seq_lens, seed=len(seq_lens))
    length, shards = shards_of(packed, cp, tp)
    chunks = 2 * cp
    bounds = shards[0].cu_seqlens.long()
    padded = bounds.diff()
    # every sequence padded to a multiple of 2cp (the last may be the row's padding), the row to 2cp x tp
    assert length % (chunks * tp) == 0 and bool((padded % chunks == 0).all())
    assert bool((padded[: len(seq_lens)] >= torch.tensor(seq_lens)).all())
    assert bool((padded[: len(seq_lens)] < torch.tensor(seq_lens) + chunks).all())
    assert int(bounds[-1]) == length and shards[0].max_seqlen == int(padded.max())
    # the shares partition the row: equal sizes, every position once
    order = torch.cat([partition_index(padded, cp, r) for r in range(cp)])
    assert all(s.input_ids.numel() == length // cp for s in shards)
    assert torch.equal(order.sort().values, torch.arange(length))
    # real tokens in order, with their own positions; each row position's label is the next token
    row_ids = torch.cat([s.input_ids for s in shards])[order.argsort()]
    row_positions = torch.cat([s.position_ids for s in shards])[order.argsort()]
    real = torch.cat([torch.arange(a, a + n) for a, n in zip(bounds.tolist(), seq_lens, strict=False)])
    assert torch.equal(row_ids[real], packed["input_ids"])
    assert torch.equal(row_positions[real], packed["position_ids"])
    assert int(row_ids[~torch.isin(torch.arange(length), real)].abs().sum()) == 0
    # a per-position value that is the label itself comes back as each loss token's own id, 0 elsewhere
    gathered = torch.cat([torch.where(s.label_mask, s.labels, 0) for s in shards]).double()
    back = unshard_token_values(gathered, shards[0], packed["loss_mask"])
    assert torch.equal(back, torch.where(packed["loss_mask"], packed["input_ids"], 0).double())
    assert sum(int(s.label_mask.sum()) for s in shards) == int(packed["loss_mask"].sum())


@pytest.mark.parametrize("cp", [2, 4])
def test_positions_are_those_megatron_rope_gives_each_rank(cp: int) -> None:
    """megatron-core's RoPE for THD rows under CP takes each rank's frequencies from the padded sequence
    lengths (`_get_thd_freqs_on_this_cp_rank`): they must be the frequencies of our positions."""
    from megatron.core.models.common.embeddings.rope_utils import _get_thd_freqs_on_this_cp_rank

    packed = packed_micro_batch([5, 12, 3], seed=3)
    _, shards = shards_of(packed, cp)
    table = torch.arange(64).float()[:, None, None, None]  # "frequency" of position p is p
    for rank, shard in enumerate(shards):
        local = (shard.cu_seqlens.diff() // cp).tolist()
        got = torch.cat(
            [
                _get_thd_freqs_on_this_cp_rank(rank, cp, piece, table)
                for piece in shard.position_ids.split(local)
            ]
        )
        assert torch.equal(got.flatten().long(), shard.position_ids)


def test_without_context_parallelism_the_row_is_unchanged() -> None:
    """cp=1 keeps the earlier layout: no per-sequence padding, the row a multiple of the TP size."""
    lens = torch.tensor([3, 5, 6])
    assert row_length(lens, 1, 1) == 14 and row_length(lens, 4, 1) == 16
    assert row_length(lens, 1, 2) == 20 and row_length(lens, 2, 2) == 24  # padded to 4 + 8 + 8


def test_micro_batches_share_one_row_length_for_context_parallelism() -> None:
    from roll.trainer.megatron.backend import deal_micro_batches

    batch = sample_batch()  # trajectories of 9, 10, 11 and 16 tokens
    micro_batches, length = deal_micro_batches(batch, 12, 0, 1, 2, context_parallel_size=2)
    assert length % 8 == 0 and len(micro_batches) == 4
    assert length == max(row_length(micro.seq_lens, 2, 2) for micro, _ in micro_batches) == 16


def test_inputs_must_fit_the_row() -> None:
    packed = packed_micro_batch([3, 5])
    with pytest.raises(ValueError, match="take the length from row_length"):
        shard_for_rank(*packed.values(), 10, 2, 0)
    packed["loss_mask"][0] = True
    with pytest.raises(ValueError, match="first token of a micro-batch cannot be a loss token"):
        shard_for_rank(*packed.values(), 12, 2, 0)


def test_model_takes_transformer_engine_attention_under_context_parallelism(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import roll.trainer.megatron.config as megatron_config
    from roll.models import resolve_model_path
    from roll.trainer.megatron.config import MegatronBackendConfig, ModelLayoutError
    from roll.trainer.megatron.model import _core_attention, transformer_config

    hf = json.loads((resolve_model_path("builtin:tiny-qwen3-moe") / "config.json").read_text())
    assert transformer_config(hf, MegatronBackendConfig(context_parallel_size=2)).cp_comm_type == "p2p"
    assert transformer_config(hf, MegatronBackendConfig()).cp_comm_type is None
    assert _core_attention(1).__name__ == "PackedSequenceAttention"
    monkeypatch.setattr(megatron_config, "transformer_engine_installed", lambda: False)
    with pytest.raises(ModelLayoutError, match="pip install 'transformer-engine\\[pytorch\\]'"):
        _core_attention(2)


def test_gpu_check_row_says_why_it_skips(monkeypatch: pytest.MonkeyPatch) -> None:
    import roll.trainer.megatron.config as megatron_config
    from roll.trainer.megatron.gpu_check import context_parallel_row

    name = "context parallel 2 matches context parallel 1"
    monkeypatch.setattr(megatron_config, "transformer_engine_installed", lambda: False)
    assert context_parallel_row() == (
        name, None, "Transformer Engine is not installed (pip install 'transformer-engine[pytorch]')"
    )  # fmt: skip
    monkeypatch.setattr(megatron_config, "transformer_engine_installed", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert context_parallel_row() == (name, None, "needs 2 GPUs, one per CP rank (NCCL), and 1 is here")


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One two-rank run (gloo) of the worker below; its results."""
    out = tmp_path_factory.mktemp("cp") / "result.pt"
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
        "--master-addr", "127.0.0.1", "--master-port", str(_free_port()), str(WORKER), str(out),
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    return torch.load(out, weights_only=False)


@pytest.mark.slow
def test_two_gloo_ranks_gather_logprobs_as_without_context_parallelism(two_ranks: dict) -> None:
    got = two_ranks["gather"]
    for name in ("logprobs", "entropy"):
        torch.testing.assert_close(got[f"cp_{name}"], got[f"reference_{name}"], atol=1e-6, rtol=0, msg=name)
    assert got["loss_tokens"] > 0 and bool((got["cp_logprobs"] != 0).sum() == got["loss_tokens"])
    # each rank's logits get the gradient of its own positions only, equal to the same rows' without CP
    torch.testing.assert_close(got["cp_grad"], got["reference_grad"], atol=1e-6, rtol=0)


@pytest.mark.slow
def test_tiny_moe_with_context_parallelism_matches_transformers(two_ranks: dict, tiny_moe) -> None:
    from roll.algo.config import IPALossConfig
    from roll.algo.losses import build_loss
    from roll.models import load_model
    from roll.trainer.forward import packed_logprobs

    got = two_ranks["model"]
    batch = sample_batch()
    with torch.no_grad():
        expected, _ = packed_logprobs(tiny_moe.model, batch, torch.device("cpu"))
    # several micro-batches, each reported once (by CP rank 0), in one row length padded for the CP split
    assert got["micro_batches"] == got["reported"] > 1 and got["length"] % 4 == 0
    torch.testing.assert_close(got["logprobs"], expected, atol=1e-5, rtol=0)
    model = load_model("builtin:tiny-qwen3-moe").model.train()
    loss = build_loss(IPALossConfig())
    prepared = loss.prepare(batch)
    logprobs, entropy = packed_logprobs(model, prepared, torch.device("cpu"), with_entropy=True)
    out = loss(prepared, logprobs, logprobs.detach(), entropy)
    out.loss.backward()
    assert got["loss"] == pytest.approx(float(out.loss), abs=1e-5)
    for name, param in model.named_parameters():
        scale = float(param.grad.abs().max())
        assert scale > 0, f"{name} got no gradient"
        torch.testing.assert_close(got["grads"][name], param.grad, atol=1e-5 * scale, rtol=1e-4, msg=name)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
