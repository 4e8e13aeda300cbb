"""Worker of test_megatron_cp and the packed micro-batches it shares with it. Not a test module.

Run by torch.distributed.run on two gloo ranks with `OUT`: initialises megatron-core with
context_parallel_size 2 and writes to OUT (rank 0) two results:
- "gather": fake logits, one row per token and the same on both ranks, through the CP path of
  `token_logprobs` (each rank's share, the collective gather) and through the path without CP: logprobs,
  entropies and the logits' gradients;
- "model": builtin:tiny-qwen3-moe under CP 2 through `MegatronBackend.logprobs` and its gradient
  accumulation (megatron-core's schedule), with `AllGatherContextAttention` standing in for Transformer
  Engine's CP attention (CUDA only): exact causal attention of each rank's queries over the keys and values
  all-gathered from the CP group.
"""

from __future__ import annotations

import sys

import torch

from roll.trainer.megatron.context_parallel import partition_index, row_length, shard_for_rank


def packed_micro_batch(seq_lens: list[int], seed: int = 0) -> dict[str, torch.Tensor]:
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


def shards_of(packed: dict[str, torch.Tensor], cp: int, tp: int = 1):
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


VOCAB = 40


def main(out: str) -> None:
    import torch.distributed as dist
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

    from roll.algo.batch import PackedBatch
    from roll.trainer.megatron.forward import token_logprobs

    rank = dist.get_rank()
    packed = packed_micro_batch([7, 1, 12, 5], seed=5)
    packed["input_ids"] %= VOCAB
    tokens = int(packed["seq_lens"].sum())
    batch = PackedBatch.__new__(PackedBatch)
    batch.input_ids, batch.loss_mask = packed["input_ids"], packed["loss_mask"]
    # row t: the logits at token t's position (which predicts token t + 1)
    table = torch.randn(tokens, VOCAB, generator=torch.Generator().manual_seed(1))
    reference_logits = table[None].clone().requires_grad_(True)
    reference, reference_entropy = token_logprobs(reference_logits, batch, VOCAB, True)
    reference.sum().backward()

    length, shards = shards_of(packed, cp=2)
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
    from test_megatron_worker import gathered_gradients, pytest_free_patch, sample_batch

    import roll.trainer.megatron.model as megatron_model
    from roll.algo.config import IPALossConfig
    from roll.algo.losses import build_loss
    from roll.models.layout import to_transformers_layout
    from roll.trainer.megatron.backend import MegatronBackend
    from roll.trainer.megatron.config import MegatronBackendConfig

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
    grads = gathered_gradients(backend)
    return {
        "micro_batches": len(micro_batches),
        "length": length,
        "logprobs": logprobs,
        "loss": sum(value for value, _ in reported),
        "reported": len(reported),
        "grads": to_transformers_layout(grads, backend.shape.num_experts),
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
    main(sys.argv[1])
