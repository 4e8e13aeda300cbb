"""The torch train backend on a tiny random Llama: packed forward, masking, micro-batching, checkpoints."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

from roll.algo.config import IPALossConfig, SFTLossConfig
from roll.algo.losses import build_loss
from roll.trainer import forward
from roll.trainer.config import OptimizerConfig, ScheduleConfig, TorchBackendConfig
from roll.trainer.forward import (
    VARLEN,
    packed_logprobs,
    padded_logprobs,
    sequence_boundaries,
    share_prefixes,
    shared_tokens,
    use_varlen_attention,
    varlen_attention_forward,
)
from roll.trainer.micro_batches import plan_micro_batches
from roll.trainer.packing import pack_trajectories
from roll.trainer.schedule import lr_factor
from roll.trainer.torch_backend import TorchBackend
from roll.types import Chunk, Trajectory

CPU = torch.device("cpu")


def tiny_llama(seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )
    config._attn_implementation = "sdpa"
    return LlamaForCausalLM(config)


def agentic_trajectories(count: int = 4, seed: int = 1) -> list[Trajectory]:
    """Multi-chunk trajectories whose chunks extend one another (shared sequences), plus a fork."""
    gen = torch.Generator().manual_seed(seed)

    def ids(n: int) -> list[int]:
        return torch.randint(1, 64, (n,), generator=gen).tolist()

    out = []
    for i in range(count):
        context = ids(5 + i)
        chunks = []
        for k in range(3):
            output = ids(2 + k)
            mu = (-torch.rand(len(output), generator=gen) * 4).tolist()
            chunks.append(
                Chunk(context_ids=context, output_ids=output, output_logprobs=mu, error=(i + k) % 4 == 0)
            )
            context = context + output + ids(3)
        chunks.append(Chunk(context_ids=ids(4), output_ids=ids(3), output_logprobs=[-1.0, -2.0, -3.0]))
        out.append(Trajectory(chunks=chunks, reward=1.0 if i % 2 else -0.5, group_id=f"g{i // 2}"))
    return out


def backend(**overrides) -> TorchBackend:
    config = TorchBackendConfig(
        optimizer=OptimizerConfig(lr=1e-3), **{"micro_batch_tokens": 4096, **overrides}
    )
    return TorchBackend(config, model=tiny_llama())


def _per_sequence_logprobs(model, batch) -> torch.Tensor:
    """Each sequence run alone through the plain forward (no packing involved); differentiable."""
    out = torch.zeros(batch.num_tokens)
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), batch.seq_lens.cumsum(0)]).tolist()
    for start, end in itertools.pairwise(offsets):
        ids = batch.input_ids[start:end]
        logits = model(input_ids=ids[None]).logits[0].float()
        out[start + 1 : end] = torch.log_softmax(logits[:-1], -1).gather(-1, ids[1:, None])[:, 0]
    return torch.where(batch.loss_mask, out, 0.0)


def test_varlen_attention_equals_block_diagonal_masked_sdpa() -> None:
    gen = torch.Generator().manual_seed(0)
    lengths = torch.tensor([5, 1, 9, 3])
    q, k, v = (torch.randn(1, 4, int(lengths.sum()), 8, generator=gen) for _ in range(3))
    module = torch.nn.Module()
    module.num_key_value_groups = 1
    boundaries = sequence_boundaries(lengths, CPU)
    got, _ = varlen_attention_forward(module, q, k, v, None, scaling=0.5, **boundaries)
    seq = torch.repeat_interleave(torch.arange(4), lengths)
    pos = torch.arange(int(lengths.sum()))
    allowed = (seq[:, None] == seq[None, :]) & (pos[:, None] >= pos[None, :])
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=0.5)
    torch.testing.assert_close(got, expected.transpose(1, 2), atol=1e-6, rtol=0)


def test_packed_logprobs_equal_per_sequence_and_padded() -> None:
    model = tiny_llama().eval()
    batch = pack_trajectories(agentic_trajectories())
    assert batch.seq_lens.numel() == 8  # every trajectory: one shared sequence of 3 chunks + a fork
    with torch.no_grad():
        expected = _per_sequence_logprobs(model, batch)
        padded, _ = padded_logprobs(model, batch, CPU)
        assert use_varlen_attention(model, CPU) == VARLEN
        packed, _ = packed_logprobs(model, batch, CPU)
        padded_varlen, _ = padded_logprobs(model, batch, CPU)
    torch.testing.assert_close(packed, expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(padded, packed, atol=1e-5, rtol=0)
    torch.testing.assert_close(padded_varlen, packed, atol=1e-5, rtol=0)
    assert (packed[~batch.loss_mask] == 0).all() and (packed[batch.loss_mask] < 0).all()


def test_packed_gradients_equal_per_sequence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forward, "LOGIT_CHUNK_ROWS", 7)  # several LM-head chunks, recomputed in backward
    batch = pack_trajectories(agentic_trajectories())
    weights = torch.linspace(0.5, 1.5, batch.num_tokens)
    reference = tiny_llama()
    (_per_sequence_logprobs(reference, batch) * weights).sum().backward()
    model = tiny_llama()
    use_varlen_attention(model, CPU)
    logprobs, entropy = packed_logprobs(model, batch, CPU, with_entropy=True)
    (logprobs * weights).sum().backward()
    for (name, param), ref in zip(model.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(param.grad, ref.grad, atol=1e-5, rtol=1e-4, msg=name)
    assert entropy is not None and (entropy[batch.loss_mask] > 0).all()


def test_masked_tokens_get_exactly_zero_gradient() -> None:
    model = tiny_llama()
    trajectories = agentic_trajectories()
    trajectories[0].chunks[1].relevant = False
    batch = pack_trajectories(trajectories)
    loss_fn = build_loss(SFTLossConfig())
    prepared = loss_fn.prepare(batch)
    logprobs, _ = packed_logprobs(model, prepared, CPU)
    logprobs.retain_grad()
    loss_fn(prepared, logprobs, logprobs.detach()).loss.backward()
    kept = ~prepared.chunk_error & prepared.chunk_relevant
    trained = prepared.loss_mask & kept[prepared.chunk_index.clamp(min=0)]
    assert (~trained).sum() > 0 and prepared.chunk_error.any()
    assert (logprobs.grad[~trained] == 0).all()  # prompt, observation, error and irrelevant tokens
    assert (logprobs.grad[trained] != 0).all()

    model.zero_grad()
    only_masked = [
        Trajectory(chunks=[c.model_copy(update={"error": True}) for c in t.chunks], reward=1.0)
        for t in trajectories
    ]
    masked_batch = loss_fn.prepare(pack_trajectories(only_masked))
    logprobs, _ = packed_logprobs(model, masked_batch, CPU)
    loss_fn(masked_batch, logprobs, logprobs.detach()).loss.backward()
    assert all(p.grad is None or (p.grad == 0).all() for p in model.parameters())


def test_micro_batches_whole_trajectories_within_budget() -> None:
    batch = pack_trajectories(agentic_trajectories(count=5))
    counts = batch.trajectory_token_counts().tolist()
    plan = plan_micro_batches(batch, token_budget=counts[0] + counts[1])
    assert plan[0] == (0, 2)
    assert [i for r in plan for i in range(*r)] == list(range(5))
    assert plan_micro_batches(batch, token_budget=1) == [(i, i + 1) for i in range(5)]


def test_padded_micro_batches_count_padded_slots() -> None:
    batch = pack_trajectories(agentic_trajectories(count=5))

    def slots(start: int, end: int) -> int:
        lengths = batch.slice_trajectories(start, end).seq_lens
        return lengths.numel() * int(lengths.max())

    budget = slots(0, 2)
    assert sum(batch.trajectory_token_counts()[:3].tolist()) <= budget < slots(0, 3)  # real tokens would fit
    plan = plan_micro_batches(batch, token_budget=budget, padded=True)
    assert plan[0] == (0, 2)
    assert [i for r in plan for i in range(*r)] == list(range(5))
    for start, end in plan:
        assert slots(start, end) <= budget or end == start + 1
        assert end == 5 or slots(start, end + 1) > budget


def _params(b: TorchBackend) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in b.state_dict_for_inference().state_dict.items()}


def test_gradient_accumulation_matches_one_micro_batch() -> None:
    batch = pack_trajectories(agentic_trajectories())
    loss = build_loss(IPALossConfig(mismatch_high=100.0))
    whole, split = backend(), backend(micro_batch_tokens=1)
    metrics_whole = whole.train_step(batch, loss)
    metrics_split = split.train_step(batch, loss)
    assert metrics_whole["loss"] == pytest.approx(metrics_split["loss"], abs=1e-6)
    assert metrics_whole["grad_norm"] == pytest.approx(metrics_split["grad_norm"], rel=1e-5)
    for name, value in _params(whole).items():
        torch.testing.assert_close(_params(split)[name], value, atol=1e-6, rtol=0)
    assert {
        "is_ratio/mean",
        "masked_fraction/mean",
        "clip_fraction/mean",
        "entropy/mean",
        "kl_k3/mean",
    } <= set(metrics_whole)
    assert whole.version == 1 and whole.state_dict_for_inference().version == 1


def test_old_logprobs_from_an_earlier_step_drive_the_is_ratio() -> None:
    b = backend()
    batch = pack_trajectories(agentic_trajectories())
    loss = build_loss(IPALossConfig(mismatch_high=100.0))
    old = b.logprobs(batch)
    b.train_step(batch, loss)
    metrics = b.train_step(batch.with_updates(old_logprobs=old), loss)
    assert metrics["is_ratio/max"] != pytest.approx(1.0, abs=1e-6)
    assert metrics["kl_k3/mean"] > 0


def test_resume_reproduces_next_steps_exactly(tmp_path: Path) -> None:
    schedule = ScheduleConfig(type="cosine", warmup_steps=1, total_steps=5)
    batches = [pack_trajectories(agentic_trajectories(seed=s)) for s in (1, 2, 3)]
    loss = build_loss(IPALossConfig(mismatch_high=100.0))
    first = backend(schedule=schedule, micro_batch_tokens=40)
    first.train_step(batches[0], loss)
    first.save(tmp_path / "ckpt")
    expected = [first.train_step(b, loss) for b in batches[1:]]

    resumed = backend(schedule=schedule, micro_batch_tokens=40)
    resumed.load(tmp_path / "ckpt")
    assert (resumed.step, resumed.version) == (1, 1)
    got = [resumed.train_step(b, loss) for b in batches[1:]]
    assert [m["loss"] for m in got] == [m["loss"] for m in expected]
    assert [m["lr"] for m in got] == [m["lr"] for m in expected]
    for name, value in _params(first).items():
        assert torch.equal(_params(resumed)[name], value), name


def test_load_without_checkpoint_says_what_to_pass(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="pass a directory written by save"):
        backend().load(tmp_path)


def test_export_hf_round_trips(tmp_path: Path) -> None:
    b = backend()
    b.train_step(pack_trajectories(agentic_trajectories()), build_loss(SFTLossConfig()))
    b.export_hf(tmp_path / "hf")
    again = AutoModelForCausalLM.from_pretrained(tmp_path / "hf")
    for name, value in again.state_dict().items():
        torch.testing.assert_close(value, b.model.state_dict()[name], atol=0, rtol=0)


def test_bf16_and_activation_checkpointing_train() -> None:
    batch = pack_trajectories(agentic_trajectories())
    b = backend(dtype="bfloat16", activation_checkpointing=True)
    metrics = b.train_step(batch, build_loss(SFTLossConfig()))
    assert torch.isfinite(torch.tensor(metrics["loss"])) and metrics["grad_norm"] > 0
    assert next(b.model.parameters()).dtype == torch.float32


def test_lr_schedule_warmup_and_decay() -> None:
    cosine = ScheduleConfig(type="cosine", warmup_steps=2, total_steps=6, min_lr_ratio=0.1)
    assert [round(lr_factor(cosine, s), 4) for s in range(7)] == [0.5, 1.0, 1.0, 0.8682, 0.55, 0.2318, 0.1]
    linear = ScheduleConfig(type="linear", total_steps=4)
    assert [lr_factor(linear, s) for s in range(5)] == [1.0, 0.75, 0.5, 0.25, 0.0]


@pytest.mark.slow
@pytest.mark.parametrize("fixture", ["smollm2", "tiny_moe"])
def test_builtin_packed_logprobs_equal_per_sequence(fixture: str, request: pytest.FixtureRequest) -> None:
    model = request.getfixturevalue(fixture).model  # shared: its attention is switched back afterwards
    batch = pack_trajectories(agentic_trajectories(count=3))
    original = model.config._attn_implementation
    with torch.no_grad():
        expected = _per_sequence_logprobs(model, batch)
        try:
            use_varlen_attention(model, CPU)
            packed, _ = packed_logprobs(model, batch, CPU)
        finally:
            model.set_attn_implementation(original)
    # 30 fp32 layers: logprobs near -5 differ by up to ~2e-5 (relative ~3e-6) between the per-sequence kernels
    # and a single forward, so the real model gets a relative term on top of the 1e-5 absolute one.
    torch.testing.assert_close(packed, expected, atol=1e-5, rtol=1e-5)


def test_kl_to_the_reference_is_zero_at_the_start_and_grows_as_the_policy_moves() -> None:
    batch = pack_trajectories(agentic_trajectories())
    config = TorchBackendConfig(optimizer=OptimizerConfig(lr=1e-2), micro_batch_tokens=40)
    with_kl = TorchBackend(config, model=tiny_llama(), reference=tiny_llama())
    without = TorchBackend(config, model=tiny_llama())
    loss = build_loss(IPALossConfig(mismatch_high=100.0, kl_coef=0.1))
    first = with_kl.train_step(batch, loss)
    assert first["kl_ref/max"] == pytest.approx(0.0, abs=1e-6)
    assert first["loss"] == pytest.approx(
        without.train_step(batch, build_loss(IPALossConfig(mismatch_high=100.0)))["loss"], abs=1e-6
    )
    assert with_kl.train_step(batch, loss)["kl_ref/mean"] > 1e-6


def test_the_reference_is_trainer_model_loaded_again(tmp_path: Path) -> None:
    from roll.models.registry import TOKENIZER_FILES, resolve_model_path

    tiny_llama().save_pretrained(tmp_path / "policy")
    tokenizer_dir = resolve_model_path("builtin:smollm2-135m-instruct")
    for name in TOKENIZER_FILES:
        if (tokenizer_dir / name).is_file():
            (tmp_path / "policy" / name).write_bytes((tokenizer_dir / name).read_bytes())
    config = TorchBackendConfig(model=str(tmp_path / "policy"), optimizer=OptimizerConfig(lr=1e-2))
    b = TorchBackend(config, model=tiny_llama())
    loss = build_loss(IPALossConfig(mismatch_high=100.0, kl_coef=0.1))
    batch = pack_trajectories(agentic_trajectories())
    assert b.train_step(batch, loss)["kl_ref/max"] == pytest.approx(0.0, abs=1e-6)
    assert b.train_step(batch, loss)["kl_ref/mean"] > 1e-6


def _trajectories_with_a_common_start() -> list[Trajectory]:
    """Four two-turn trajectories opening with the same 12 tokens, in two groups whose members also share
    their task (3 more tokens); the first two are the same up to their last observation, so their shared
    start runs through generated (loss) tokens too."""
    gen = torch.Generator().manual_seed(3)

    def ids(n: int) -> list[int]:
        return torch.randint(1, 64, (n,), generator=gen).tolist()

    common, tasks = ids(12), [ids(3), ids(3)]
    out = []
    for i in range(4):
        context = common + tasks[i // 2] + ids(1 + i)
        first = Chunk(context_ids=context, output_ids=ids(3), output_logprobs=[-1.0] * 3)
        second_context = context + first.output_ids + ids(2)
        second = Chunk(context_ids=second_context, output_ids=ids(4), output_logprobs=[-1.0] * 4)
        out.append(Trajectory(chunks=[first, second], reward=1.0 - i, group_id=f"g{i // 2}"))
    out[1] = out[0].model_copy(
        update={"chunks": [out[0].chunks[0], out[0].chunks[1].model_copy(update={"output_ids": ids(4)})]}
    )
    return out


def test_share_prefixes_stores_each_shared_start_once() -> None:
    # Three sequences share [5, 6]; the first and third also share [7] after it.
    ids = torch.tensor([5, 6, 7, 1, 5, 6, 8, 5, 6, 7, 2])
    positions = torch.tensor([0, 1, 2, 3, 0, 1, 2, 0, 1, 2, 3])
    lengths = torch.tensor([4, 3, 4])
    row = share_prefixes(ids, positions, lengths, min_prefix=1)
    assert row is not None
    # Segments, depth first: [5, 6]; [7] under it; [1] and [2] under that; [8] under [5, 6].
    assert row.input_ids.tolist() == [5, 6, 7, 1, 2, 8]
    assert row.lengths == [2, 1, 1, 1, 1]
    assert row.ancestors == [[], [0], [0, 1], [0, 1], [0]]
    assert row.position_ids.tolist() == [0, 1, 2, 3, 3, 2]
    assert row.gather.tolist() == [0, 1, 2, 3, 0, 1, 5, 0, 1, 2, 4]
    assert torch.equal(row.input_ids[row.gather], ids) and torch.equal(
        row.position_ids[row.gather], positions
    )
    assert shared_tokens(ids, positions, lengths, 1) == 5
    # At least 2 tokens a segment: [7] is too short to share; [5, 6] still is.
    two = share_prefixes(ids, positions, lengths, min_prefix=2)
    assert two is not None and two.input_ids.tolist() == [5, 6, 7, 1, 7, 2, 8]
    # At least 3: only the first and third share, [5, 6, 7]; the second stays whole.
    three = share_prefixes(ids, positions, lengths, min_prefix=3)
    assert three is not None and three.input_ids.tolist() == [5, 6, 7, 1, 2, 5, 6, 8]
    assert three.ancestors == [[], [0], [0], []]
    assert share_prefixes(ids, positions, lengths, min_prefix=4) is None
    assert share_prefixes(ids, positions, lengths, min_prefix=0) is None
    # The same tokens at other positions are no shared start.
    moved = positions + torch.tensor([0] * 4 + [1] * 3 + [0] * 4)
    one = share_prefixes(ids, moved, lengths, min_prefix=1)
    assert one is not None and one.input_ids.tolist() == [5, 6, 7, 1, 2, 5, 6, 8]
    # Sequences that share nothing from their first token on are left whole.
    assert (
        share_prefixes(torch.tensor([1, 2, 3, 4]), torch.tensor([0, 1, 0, 1]), torch.tensor([2, 2]), 1)
        is None
    )


def test_shared_prefix_logprobs_and_gradients_equal_per_sequence() -> None:
    batch = pack_trajectories(_trajectories_with_a_common_start())
    row = share_prefixes(batch.input_ids, batch.position_ids, batch.seq_lens, min_prefix=1)
    # All four share 12 tokens, each group 3 more, the first two their whole first turn.
    assert row is not None and row.lengths[0] == 12 and len(row.lengths) == 7
    assert row.input_ids.numel() == batch.num_tokens - 3 * 12 - 2 * 3 - (1 + 3 + 2)
    weights = torch.linspace(0.5, 1.5, batch.num_tokens)
    reference = tiny_llama()
    expected = _per_sequence_logprobs(reference, batch)
    (expected * weights).sum().backward()
    model = tiny_llama()
    use_varlen_attention(model, CPU)
    logprobs, entropy = packed_logprobs(model, batch, CPU, with_entropy=True, shared_prefix=1)
    (logprobs * weights).sum().backward()
    torch.testing.assert_close(logprobs, expected, atol=1e-5, rtol=0)
    for (name, param), ref in zip(model.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(param.grad, ref.grad, atol=1e-5, rtol=1e-4, msg=name)
    _, whole_entropy = packed_logprobs(model, batch, CPU, with_entropy=True)
    torch.testing.assert_close(entropy, whole_entropy, atol=1e-5, rtol=0)


def test_shared_starts_refuse_attention_dropout() -> None:
    model = tiny_llama()
    for layer in model.model.layers:
        layer.self_attn.attention_dropout = 0.1
    use_varlen_attention(model, CPU)
    batch = pack_trajectories(_trajectories_with_a_common_start())
    with pytest.raises(ValueError, match="shared_prefix_tokens: 0"):
        packed_logprobs(model.train(), batch, CPU, shared_prefix=1)
    logprobs, _ = packed_logprobs(model.eval(), batch, CPU, shared_prefix=1)  # no dropout outside training
    assert (logprobs[batch.loss_mask] < 0).all()


def test_micro_batch_budget_counts_a_shared_start_once() -> None:
    batch = pack_trajectories(_trajectories_with_a_common_start())
    tokens = batch.trajectory_token_counts().tolist()
    budget = tokens[0] + tokens[1] + 4  # two whole trajectories fit, not three
    assert plan_micro_batches(batch, budget)[0] == (0, 2)
    # Counted once, the starts the first three trajectories share (12 tokens, and 19 more between the first
    # two) leave room for the third.
    assert plan_micro_batches(batch, budget, shared_prefix=1)[0] == (0, 3)
    part = batch.slice_trajectories(0, 3)
    assert part.num_tokens - shared_tokens(part.input_ids, part.position_ids, part.seq_lens, 1) <= budget


def test_a_train_step_is_the_same_with_the_shared_start_computed_once() -> None:
    batch = pack_trajectories(_trajectories_with_a_common_start())
    loss = build_loss(IPALossConfig(group_baseline=True))
    shared, whole = backend(shared_prefix_tokens=1), backend(shared_prefix_tokens=0)
    first, second = shared.train_step(batch, loss), whole.train_step(batch, loss)
    assert first["loss"] == pytest.approx(second["loss"], abs=1e-6)
    assert first["grad_norm"] == pytest.approx(second["grad_norm"], rel=1e-4)
    # Adam's first step moves every weight by about lr (1e-3) whatever its gradient's size, so float noise
    # in a near-zero gradient shows as up to ~1e-5 here.
    for a, b in zip(shared.model.parameters(), whole.model.parameters(), strict=True):
        torch.testing.assert_close(a, b, atol=2e-5, rtol=1e-5)
