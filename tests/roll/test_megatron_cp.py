"""Context parallelism's batch split and gather (roll.trainer.megatron.context_parallel): each rank's share is
Transformer Engine's THD partition (chunks r and 2cp-1-r of every sequence padded to 2cp), the shares put
back in token order are an exact round trip, the per-rank positions are those megatron-core's RoPE gives
each rank, and over two gloo processes the logprobs and entropies of the CP path (its collective gather
included, and its gradients) equal the path without CP.

Over the same two ranks, builtin:tiny-qwen3-moe runs in megatron-core with context_parallel_size 2 end to
end (the shares as inputs, megatron-core's THD RoPE under CP, the gathered logprobs, and the IPA loss's
gradients reduced over the CP ranks by megatron-core) and matches transformers. Transformer Engine's
attention, which does the CP exchange on GPUs, needs CUDA; here `AllGatherContextAttention` stands in for
it: exact causal attention of each rank's queries over keys and values all-gathered from the CP group.

Run as `python test_megatron_cp.py OUT` under torch.distributed.run it is that two-rank worker.
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


def _packed(seq_lens: list[int], seed: int = 0) -> dict[str, torch.Tensor]:
    """[T] tensors of a packed micro-batch: random ids, positions restarting per sequence, and a loss mask
    on a random tail of each sequence (never its first token)."""
    gen = torch.Generator().manual_seed(seed)
    lens = torch.tensor(seq_lens)
    ids = torch.randint(1, 1000, (int(lens.sum()),), generator=gen)
    positions = torch.cat([torch.arange(n) for n in seq_lens])
    mask = torch.zeros(int(lens.sum()), dtype=torch.bool)
    start = 0
    for n in seq_lens:
        first = int(torch.randint(1, n, (1,), generator=gen)) if n > 1 else n
        mask[start + first : start + n] = True
        start += n
    return {"input_ids": ids, "position_ids": positions, "loss_mask": mask, "seq_lens": lens}


def _shards(packed: dict[str, torch.Tensor], cp: int, tp: int = 1):
    length = row_length(packed["seq_lens"], tp, cp)
    return length, [
        shard_for_rank(
            packed["input_ids"],
            packed["position_ids"],
            packed["loss_mask"],
            packed["seq_lens"],
            length,
            cp,
            r,
        )
        for r in range(cp)
    ]


def test_one_sequence_of_eight_tokens_over_two_ranks() -> None:
    packed = _packed([8])
    packed["input_ids"] = torch.arange(100, 108)
    length, (first, second) = _shards(packed, cp=2)
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
    packed = _packed([3, 5])
    length, (first, second) = _shards(packed, cp=2)
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
    packed = _packed(seq_lens, seed=len(seq_lens))
    length, shards = _shards(packed, cp, tp)
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

    packed = _packed([5, 12, 3], seed=3)
    _, shards = _shards(packed, cp)
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


def test_inputs_must_fit_the_row() -> None:
    packed = _packed([3, 5])
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
        "--master-addr", "127.0.0.1", "--master-port", str(_free_port()), __file__, str(out),
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

    sys.path.insert(0, str(Path(__file__).parent))
    from test_megatron_worker import sample_batch

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


# ---- the two-rank worker (run by torch.distributed.run) ----

VOCAB = 40


def _worker(out: str) -> None:
    import torch.distributed as dist

    sys.path.insert(0, str(Path(__file__).parent))
    from test_megatron_worker import megatron_on_cpu

    dist.init_process_group("gloo")
    with megatron_on_cpu():
        from megatron.core import parallel_state as ps

        ps.initialize_model_parallel(context_parallel_size=2)
        assert ps.get_context_parallel_rank() == dist.get_rank()
        results = {"gather": _gather_run(), "model": _model_run()}
        if dist.get_rank() == 0:
            torch.save(results, out)
        ps.destroy_model_parallel()
    dist.destroy_process_group()


def _gather_run() -> dict:
    """Fake logits, one row per token and the same on both ranks: the CP path's logprobs, entropies and
    logits gradients against the path without CP."""
    import torch.distributed as dist

    from roll.trainer.megatron.forward import token_logprobs
    from roll.types import PackedBatch

    rank = dist.get_rank()
    packed = _packed([7, 1, 12, 5], seed=5)
    packed["input_ids"] %= VOCAB
    tokens = int(packed["seq_lens"].sum())
    batch = PackedBatch.__new__(PackedBatch)
    batch.input_ids, batch.loss_mask = packed["input_ids"], packed["loss_mask"]
    # row t: the logits at token t's position (which predicts token t + 1)
    table = torch.randn(tokens, VOCAB, generator=torch.Generator().manual_seed(1))
    reference_logits = table[None].clone().requires_grad_(True)
    reference, reference_entropy = token_logprobs(reference_logits, batch, VOCAB, True)
    reference.sum().backward()

    length, shards = _shards(packed, cp=2)
    shard = shards[rank]
    token_rows = _token_rows(packed["seq_lens"], shard.cu_seqlens)
    row = torch.full((length, VOCAB), 1e3)  # padding rows: any value, they predict nothing
    row[token_rows] = table
    mine = partition_index(shard.cu_seqlens.diff().long(), 2, rank)
    local_logits = row[mine][None].clone().requires_grad_(True)
    logprobs, entropy = token_logprobs(local_logits, batch, VOCAB, True, shard)
    logprobs.sum().backward()
    expected_grad = torch.zeros(length, VOCAB)
    expected_grad[token_rows] = reference_logits.grad[0]
    grads = [None, None]
    dist.all_gather_object(grads, (local_logits.grad[0], expected_grad[mine]))
    return {
        "cp_logprobs": logprobs.detach(),
        "cp_entropy": entropy,
        "reference_logprobs": reference.detach(),
        "reference_entropy": reference_entropy,
        "loss_tokens": int(packed["loss_mask"].sum()),
        "cp_grad": torch.cat([g for g, _ in grads]),
        "reference_grad": torch.cat([e for _, e in grads]),
    }


def _model_run() -> dict:
    """builtin:tiny-qwen3-moe under CP 2 with the stand-in attention, through the backend's own paths
    (micro-batches of at most 24 tokens in megatron-core's schedule): its logprobs, and the IPA loss's
    gradients as one train step makes them (the schedule's loss scaling, the reduction over data x
    context parallel ranks), gathered into transformers names."""
    from test_megatron_worker import pytest_free_patch, sample_batch

    import roll.trainer.megatron.model as megatron_model
    from roll.algo.config import IPALossConfig
    from roll.algo.losses import build_loss
    from roll.trainer.megatron.backend import MegatronBackend
    from roll.trainer.megatron.config import MegatronBackendConfig
    from roll.trainer.megatron.mapping import to_transformers_layout
    from roll.trainer.megatron.weights import gather_hf_buckets, local_parameters

    # bfloat16 is the config rule for Transformer Engine's kernels; the stand-in computes in float32.
    config = MegatronBackendConfig(
        context_parallel_size=2,
        moe_token_dispatcher="allgather",
        distributed_optimizer=False,
        micro_batch_tokens=24,
    ).model_copy(update={"dtype": "float32"})
    zeros = torch.zeros

    def zeros_on_cpu(*args, device=None, **kwargs):
        # megatron-core's schedule keeps its token count on device "cuda" whatever the model's device
        return zeros(*args, device="cpu" if device == "cuda" else device, **kwargs)

    with pytest_free_patch() as patch:
        patch(megatron_model, "_core_attention", lambda size: AllGatherContextAttention)
        patch(torch, "zeros", zeros_on_cpu)
        backend = MegatronBackend.__new__(MegatronBackend)
        backend._setup_model(config, torch.device("cpu"))
        batch = sample_batch()
        micro_batches, length = backend._my_micro_batches(batch)
        logprobs = backend.logprobs(batch)
        reported = backend._accumulate_gradients(batch, build_loss(IPALossConfig()))
    params = local_parameters(backend.model)
    weights = {name: p.data for name, p in params.items()}
    for p in params.values():
        p.data = p.main_grad.to(p.dtype)
    try:
        grads = {name: t for bucket in gather_hf_buckets(backend.model, backend.shape) for name, t in bucket}
    finally:
        for name, p in params.items():
            p.data = weights[name]
    return {
        "micro_batches": len(micro_batches),
        "length": length,
        "logprobs": logprobs,
        "loss": sum(value for value, _ in reported),
        "reported": len(reported),
        "grads": to_transformers_layout(grads, backend.shape),
    }


class AllGatherContextAttention(torch.nn.Module):
    """Stand-in for Transformer Engine's CP attention on CPU: each rank's queries attend causally within
    their sequence over the keys and values of the whole row, all-gathered from the CP group (in backward
    their gradients are summed back to the ranks that own them)."""

    def __init__(self, config, layer_number, attn_mask_type, attention_type, **kwargs) -> None:
        super().__init__()
        softmax_scale = kwargs.get("softmax_scale")
        self.scale = softmax_scale if softmax_scale is not None else config.kv_channels**-0.5

    def forward(self, query, key, value, attention_mask, attn_mask_type=None, attention_bias=None,
                packed_seq_params=None):  # fmt: skip
        import torch.nn.functional as F
        from megatron.core import parallel_state as ps
        from megatron.core.tensor_parallel.mappings import gather_from_sequence_parallel_region

        group = ps.get_context_parallel_group()
        cp, rank = group.size(), group.rank()
        bounds = packed_seq_params.cu_seqlens_q.long()
        padded = bounds.diff()
        row_order = torch.cat([partition_index(padded, cp, r) for r in range(cp)]).argsort()
        keys = gather_from_sequence_parallel_region(key, True, group)[row_order]
        values = gather_from_sequence_parallel_region(value, True, group)[row_order]
        query_rows = partition_index(padded, cp, rank)
        parts, offset = [], 0
        for start, size in zip(bounds[:-1].tolist(), padded.tolist(), strict=True):
            count = size // cp
            rows = query_rows[offset : offset + count]
            visible = torch.arange(start, start + size)[None, :] <= rows[:, None]
            out = F.scaled_dot_product_attention(
                query[offset : offset + count].transpose(0, 1)[None],
                keys[start : start + size].transpose(0, 1)[None],
                values[start : start + size].transpose(0, 1)[None],
                attn_mask=visible,
                scale=self.scale,
                enable_gqa=True,
            )
            parts.append(out[0].transpose(0, 1))
            offset += count
        out = torch.cat(parts)
        return out.reshape(out.shape[0], -1)


def _token_rows(seq_lens: torch.Tensor, cu_seqlens: torch.Tensor) -> torch.Tensor:
    return torch.cat(
        [torch.arange(a, a + int(n)) for a, n in zip(cu_seqlens.tolist(), seq_lens, strict=False)]
    )


if __name__ == "__main__":
    _worker(sys.argv[1])
