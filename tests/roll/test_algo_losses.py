"""Every loss against numbers worked by hand, including the gradient w.r.t. the current logprobs.

Each chunk gets its own context token, so the loss positions of a packed batch are exactly the generated
tokens in order; `_token_values` places per-generated-token numbers at those positions.
"""

import math

import pytest
import torch

from roll.algo.batch import PackedBatch
from roll.algo.config import (
    GRPOLossConfig,
    IPALossConfig,
    ReinforceLossConfig,
    SFTLossConfig,
    TokenReinforceLossConfig,
)
from roll.algo.losses import build_loss, summarize
from roll.trainer.packing import pack_trajectories
from roll.types import Chunk, Trajectory


def _chunk(n: int, mu: list[float] | None = None, **flags: bool) -> Chunk:
    return Chunk(context_ids=[0], output_ids=list(range(1, n + 1)), output_logprobs=mu, **flags)


def _token_values(batch: PackedBatch, values: list[float], grad: bool = False) -> torch.Tensor:
    out = torch.zeros(batch.num_tokens)
    out[batch.loss_mask] = torch.tensor(values)
    return out.requires_grad_(grad)


def _run(config, batch: PackedBatch, lp: list[float], old: list[float]):
    loss_fn = build_loss(config)
    prepared = loss_fn.prepare(batch)
    logprobs = _token_values(prepared, lp, grad=True)
    out = loss_fn(prepared, logprobs, _token_values(prepared, old))
    out.loss.backward()
    return prepared, out, logprobs.grad[prepared.loss_mask].tolist()


def _ipa_batch(negative_old: list[float], negative_mu: list[float], **traj_kwargs) -> PackedBatch:
    return pack_trajectories(
        [
            Trajectory(
                chunks=[_chunk(2, mu=[-1.0, -2.0]), _chunk(1, mu=[-0.5 - math.log(3)])],
                reward=1.0,
                **traj_kwargs,
            ),
            Trajectory(chunks=[_chunk(2, mu=negative_mu)], reward=-1.0, **traj_kwargs),
        ]
    )


LP = [-1.0, -2.0, -0.5, -1.0, -1.2]


def test_ipa_positive_full_rate_mismatch_mask_and_clipped_negative() -> None:
    # G = [0.5^1 * 1, 0.5^0 * 1, -1]; chunk 1's mismatch ratio is exp(log 3) = 3 > H = 2 -> masked;
    # chunk 2: rho = exp(mean(0.2, 0.2)) = 1.2214 -> clipped to 1, mismatch exp(0.1) kept.
    batch = _ipa_batch(negative_old=[-1.2, -1.4], negative_mu=[-1.3, -1.5])
    old = [-1.0, -2.0, -0.5, -1.2, -1.4]
    prepared, out, grad = _run(IPALossConfig(gamma=0.5, mismatch_high=2.0), batch, LP, old)
    assert prepared.chunk_advantage.tolist() == pytest.approx([0.5, 1.0, -1.0])
    # L = -(0.5*-1 + 0.5*-2 + 0 + (-1)(-1) + (-1)(-1.2)) / 5 = -0.14
    assert out.loss.item() == pytest.approx(-0.14, abs=1e-6)
    assert grad == pytest.approx([-0.1, -0.1, 0.0, 0.2, 0.2], abs=1e-6)
    assert out.metrics["is_ratio"].tolist() == pytest.approx([1.0, 1.0, math.exp(0.2)], abs=1e-6)
    assert out.metrics["masked_fraction"].tolist() == [0.0, 1.0, 0.0]
    assert out.metrics["clip_fraction"].tolist() == [0.0, 0.0, 1.0]
    assert out.metrics["mismatch_ratio"].tolist() == pytest.approx([1.0, 3.0, math.exp(0.1)], abs=1e-5)


def test_ipa_negative_chunk_weighted_by_is_ratio_below_one() -> None:
    # chunk 2: rho = exp(-0.2) = 0.818731 -> weight -0.818731, stop-gradient on rho
    batch = _ipa_batch(negative_old=[-0.8, -1.0], negative_mu=[-0.9, -1.1])
    old = [-1.0, -2.0, -0.5, -0.8, -1.0]
    _, out, grad = _run(IPALossConfig(gamma=0.5), batch, LP, old)
    rho = math.exp(-0.2)
    assert out.loss.item() == pytest.approx(-(-1.5 + rho * 2.2) / 5, abs=1e-6)
    assert grad == pytest.approx([-0.1, -0.1, 0.0, rho / 5, rho / 5], abs=1e-6)
    assert out.metrics["clip_fraction"].tolist() == [0.0, 0.0, 0.0]


def test_ipa_mismatch_low_bound_and_sequence_mean() -> None:
    batch = _ipa_batch(negative_old=[-1.2, -1.4], negative_mu=[-1.3, -1.5])
    old = [-1.0, -2.0, -0.5, -1.2, -1.4]
    config = IPALossConfig(gamma=0.5, mismatch_high=10.0, mismatch_low=1.05, normalization="sequence_mean")
    # chunk 0 ratio 1 < L -> masked; chunk 1 ratio 3 kept; chunk 2 ratio 1.105 kept; 3 chunks
    # L = -(0 + 1*(-0.5)/1 + (-1)(-1)/2 + (-1)(-1.2)/2) / 3 = -0.6/3
    _, out, grad = _run(config, batch, LP, old)
    assert out.loss.item() == pytest.approx(-0.2, abs=1e-6)
    assert grad == pytest.approx([0.0, 0.0, -1 / 3, 1 / 6, 1 / 6], abs=1e-6)


def test_ipa_group_baseline_subtracts_group_mean_reward() -> None:
    batch = pack_trajectories(
        [
            Trajectory(chunks=[_chunk(1), _chunk(1)], reward=1.0, group_id="a"),
            Trajectory(chunks=[_chunk(1)], reward=0.0, group_id="a"),
            Trajectory(chunks=[_chunk(1)], reward=3.0, group_id="b"),
        ]
    )
    prepared = build_loss(IPALossConfig(gamma=0.5, group_baseline=True)).prepare(batch)
    # group a mean 0.5: R' = 0.5, -0.5; group b alone: R' = 0
    assert prepared.chunk_advantage.tolist() == pytest.approx([0.25, 0.5, -0.5, 0.0])


def test_ipa_imitation_fallback_on_expert_chunks() -> None:
    batch = pack_trajectories([Trajectory(chunks=[_chunk(2, expert=True), _chunk(1, mu=[-0.5])], reward=1.0)])
    config = IPALossConfig(gamma=0.5, lambda_il=0.5, lambda_rl=2.0)
    lp = [-1.0, -2.0, -0.5]
    # L = 0.5 * (1 + 2)/2 + 2 * (-(1.0 * -0.5) / 1) = 0.75 + 1.0
    _, out, grad = _run(config, batch, lp, lp)
    assert out.loss.item() == pytest.approx(1.75, abs=1e-6)
    assert grad == pytest.approx([-0.25, -0.25, -2.0], abs=1e-6)


def test_token_reinforce_discounts_per_token() -> None:
    batch = pack_trajectories(
        [
            Trajectory(chunks=[_chunk(2, mu=[-1, -1]), _chunk(1, mu=[-1])], reward=1.0),
            Trajectory(chunks=[_chunk(1, mu=[-1.5])], reward=-1.0),
        ]
    )
    lp = [-1.0, -1.0, -1.0, -1.0]
    old = [-1.0, -1.0, -1.0, -1.5]
    # G = [0.25, 0.5, 1, -1]; token 3: rho = exp(0.5) -> clipped to 1
    prepared, out, grad = _run(TokenReinforceLossConfig(gamma=0.5), batch, lp, old)
    assert prepared.token_advantage[prepared.loss_mask].tolist() == pytest.approx([0.25, 0.5, 1.0, -1.0])
    assert out.loss.item() == pytest.approx(-(-0.25 - 0.5 - 1.0 + 1.0) / 4, abs=1e-6)
    assert grad == pytest.approx([-0.0625, -0.125, -0.25, 0.25], abs=1e-6)
    assert out.metrics["clip_fraction"].tolist() == [0.0, 0.0, 0.0, 1.0]


def test_grpo_group_normalised_advantage_and_ppo_clip() -> None:
    batch = pack_trajectories(
        [Trajectory(chunks=[_chunk(1)], reward=r, group_id="g") for r in (1.0, 0.0, 0.0)]
    )
    lp = [-1.0, -1.0, -2.0]
    old = [-1.5, -1.0, -1.5]
    prepared, out, grad = _run(GRPOLossConfig(std_eps=1e-12), batch, lp, old)
    # mean 1/3, unbiased std sqrt(1/3): A = [2/sqrt(3), -1/sqrt(3), -1/sqrt(3)]
    a_pos, a_neg = 2 / math.sqrt(3), -1 / math.sqrt(3)
    assert prepared.chunk_advantage.tolist() == pytest.approx([a_pos, a_neg, a_neg], abs=1e-6)
    # token 0: r = e^0.5 > 1.2, A > 0 -> 1.2 A (no grad); token 1: r = 1 -> A; token 2: r = e^-0.5 < 0.8,
    # A < 0 -> min(rA, 0.8A) = 0.8A (no grad)
    assert out.loss.item() == pytest.approx(-(1.2 * a_pos + a_neg + 0.8 * a_neg) / 3, abs=1e-6)
    assert grad == pytest.approx([0.0, -a_neg / 3, 0.0], abs=1e-6)
    assert out.metrics["clip_fraction"].tolist() == [1.0, 0.0, 1.0]


def test_grpo_single_member_group_has_zero_advantage() -> None:
    batch = pack_trajectories([Trajectory(chunks=[_chunk(1)], reward=5.0, group_id="solo")])
    assert build_loss(GRPOLossConfig()).prepare(batch).chunk_advantage.tolist() == [0.0]


def test_reinforce_sequence_geometric_mean_truncated_is() -> None:
    batch = pack_trajectories(
        [
            Trajectory(chunks=[_chunk(1, mu=[-1.5]), _chunk(1, mu=[-2.5])], reward=1.0),
            Trajectory(chunks=[_chunk(1, mu=[-2.0])], reward=-1.0),
        ]
    )
    lp = [-1.0, -2.0, -1.0]
    # traj 0: rho = exp(mean(0.5, 0.5)) = e^0.5 < C = 2; traj 1: rho = e^1 -> truncated to 2
    _, out, grad = _run(ReinforceLossConfig(is_cap=2.0), batch, lp, lp)
    w0 = math.exp(0.5)
    assert out.loss.item() == pytest.approx(-(w0 * -3.0 + 2.0) / 3, abs=1e-6)
    assert grad == pytest.approx([-w0 / 3, -w0 / 3, 2 / 3], abs=1e-6)
    assert out.metrics["clip_fraction"].tolist() == [0.0, 1.0]


def test_error_masked_sft_gives_masked_chunks_exactly_zero_gradient() -> None:
    batch = pack_trajectories(
        [
            Trajectory(chunks=[_chunk(2, error=True), _chunk(1)], reward=0.0),
            Trajectory(chunks=[_chunk(2, relevant=False), _chunk(3)], reward=0.0),
        ]
    )
    lp = [-1.0, -2.0, -0.5, -3.0, -3.0, -0.1, -0.2, -0.3]
    _, out, grad = _run(SFTLossConfig(eps=1e-8), batch, lp, lp)
    assert out.loss.item() == pytest.approx((0.5 + 0.1 + 0.2 + 0.3) / (4 + 1e-8), abs=1e-6)
    assert grad[:2] == [0.0, 0.0] and grad[3:5] == [0.0, 0.0]
    assert grad[2] == pytest.approx(-0.25) and grad[5:] == pytest.approx([-0.25] * 3)
    assert out.metrics["masked_fraction"].tolist() == [1.0, 0.0, 1.0, 0.0]


def test_micro_batches_sum_to_the_full_batch_loss() -> None:
    batch = _ipa_batch(negative_old=[-0.8, -1.0], negative_mu=[-0.9, -1.1])
    loss_fn = build_loss(IPALossConfig(gamma=0.5))
    prepared = loss_fn.prepare(batch)
    lp = _token_values(prepared, LP)
    old = _token_values(prepared, [-1.0, -2.0, -0.5, -0.8, -1.0])
    full = loss_fn(prepared, lp, old).loss
    offsets = prepared.trajectory_token_counts().cumsum(0).tolist()
    parts = [
        loss_fn(prepared.slice_trajectories(0, 1), lp[: offsets[0]], old[: offsets[0]]).loss,
        loss_fn(prepared.slice_trajectories(1, 2), lp[offsets[0] :], old[offsets[0] :]).loss,
    ]
    assert (parts[0] + parts[1]).item() == pytest.approx(full.item(), abs=1e-7)


def test_summarize_reports_mean_min_max() -> None:
    stats = summarize([{"x": torch.tensor([1.0, 3.0])}, {"x": torch.tensor([2.0])}])
    assert stats == {"x/mean": 2.0, "x/min": 1.0, "x/max": 3.0}


# A chunk marked not relevant (task-aware context mask) contributes nothing to any RL loss: no weight, no
# gradient, not counted in the normaliser; returns and group advantages still count every chunk.


def test_ipa_irrelevant_chunk_contributes_nothing() -> None:
    batch = pack_trajectories(
        [
            Trajectory(chunks=[_chunk(2, mu=[-1.0, -2.0]), _chunk(1, mu=[-0.5], relevant=False)], reward=1.0),
            Trajectory(chunks=[_chunk(2, mu=[-1.3, -1.5])], reward=-1.0),
        ]
    )
    old = [-1.0, -2.0, -0.5, -1.2, -1.4]
    prepared, out, grad = _run(IPALossConfig(gamma=0.5), batch, LP, old)
    # G = [0.5, 1, -1] as without the mask; 4 trained tokens:
    # L = -(0.5*-1 + 0.5*-2 + (-1)(-1) + (-1)(-1.2)) / 4
    assert prepared.chunk_advantage.tolist() == pytest.approx([0.5, 1.0, -1.0])
    assert prepared.norm["rl"] == 4.0
    assert out.loss.item() == pytest.approx(-0.175, abs=1e-6)
    assert grad == pytest.approx([-0.125, -0.125, 0.0, 0.25, 0.25], abs=1e-6) and grad[2] == 0.0
    assert out.metrics["is_ratio"].tolist() == pytest.approx([1.0, math.exp(0.2)], abs=1e-6)

    _, out, grad = _run(IPALossConfig(gamma=0.5, normalization="sequence_mean"), batch, LP, old)
    # two trained chunks: L = -(0.5*(-1-2)/2 + (-1)(-1-1.2)/2) / 2
    assert out.loss.item() == pytest.approx(-(-0.75 + 1.1) / 2, abs=1e-6)
    assert grad == pytest.approx([-0.125, -0.125, 0.0, 0.25, 0.25], abs=1e-6)


def test_grpo_irrelevant_chunk_contributes_nothing() -> None:
    trajectories = [Trajectory(chunks=[_chunk(1)], reward=r, group_id="g") for r in (1.0, 0.0, 0.0)]
    trajectories[1].chunks[0].relevant = False
    lp = [-1.0, -1.0, -2.0]
    old = [-1.5, -1.0, -2.0]
    prepared, out, grad = _run(GRPOLossConfig(std_eps=1e-12), pack_trajectories(trajectories), lp, old)
    a_pos, a_neg = 2 / math.sqrt(3), -1 / math.sqrt(3)  # the group still has three members
    assert prepared.chunk_advantage.tolist() == pytest.approx([a_pos, a_neg, a_neg], abs=1e-6)
    # token 0 clipped at 1.2 (no grad), token 1 masked, token 2 ratio 1; two trained tokens
    assert out.loss.item() == pytest.approx(-(1.2 * a_pos + a_neg) / 2, abs=1e-6)
    assert grad == pytest.approx([0.0, 0.0, -a_neg / 2], abs=1e-6) and grad[1] == 0.0
    assert out.metrics["advantage"].tolist() == pytest.approx([a_pos, a_neg], abs=1e-6)


def test_token_reinforce_irrelevant_chunk_contributes_nothing() -> None:
    batch = pack_trajectories(
        [
            Trajectory(chunks=[_chunk(2, mu=[-1, -1]), _chunk(1, mu=[-1], relevant=False)], reward=1.0),
            Trajectory(chunks=[_chunk(1, mu=[-1.5])], reward=-1.0),
        ]
    )
    lp = [-1.0, -1.0, -1.0, -1.0]
    old = [-1.0, -1.0, -1.0, -1.5]
    # G = [0.25, 0.5, 1, -1] (discounting counts the masked token); trained tokens 0, 1, 3
    _, out, grad = _run(TokenReinforceLossConfig(gamma=0.5), batch, lp, old)
    assert out.loss.item() == pytest.approx(-(-0.25 - 0.5 + 1.0) / 3, abs=1e-6)
    assert grad == pytest.approx([-0.25 / 3, -0.5 / 3, 0.0, 1 / 3], abs=1e-6) and grad[2] == 0.0


def test_reinforce_irrelevant_chunk_leaves_the_sequence_ratio() -> None:
    batch = pack_trajectories(
        [
            Trajectory(chunks=[_chunk(1, mu=[-1.5]), _chunk(1, mu=[-3.0], relevant=False)], reward=1.0),
            Trajectory(chunks=[_chunk(1, mu=[-2.0])], reward=-1.0),
        ]
    )
    lp = [-1.0, -2.0, -1.0]
    # traj 0: rho over its trained token only = e^0.5 (with the masked one it would be e^0.75)
    _, out, grad = _run(ReinforceLossConfig(is_cap=2.0), batch, lp, lp)
    w0 = math.exp(0.5)
    assert out.metrics["is_ratio"].tolist() == pytest.approx([w0, math.e], abs=1e-6)
    assert out.loss.item() == pytest.approx(-(w0 * -1.0 + 2.0) / 2, abs=1e-6)
    assert grad == pytest.approx([-w0 / 2, 0.0, 1.0], abs=1e-6) and grad[1] == 0.0


def test_ipa_mask_truncated_drops_a_cut_chunk_as_the_relevance_mask_does() -> None:
    batch = pack_trajectories(
        [
            Trajectory(chunks=[_chunk(2, mu=[-1.0, -2.0]), _chunk(1, mu=[-0.5], truncated=True)], reward=1.0),
            Trajectory(chunks=[_chunk(2, mu=[-1.3, -1.5])], reward=-1.0),
        ]
    )
    old = [-1.0, -2.0, -0.5, -1.2, -1.4]
    # The same numbers as test_ipa_irrelevant_chunk_contributes_nothing: 4 trained tokens, L = -0.175.
    prepared, out, grad = _run(IPALossConfig(gamma=0.5, mask_truncated=True), batch, LP, old)
    assert prepared.chunk_truncated.tolist() == [False, True, False]
    assert prepared.norm["rl"] == 4.0
    assert out.loss.item() == pytest.approx(-0.175, abs=1e-6)
    assert grad == pytest.approx([-0.125, -0.125, 0.0, 0.25, 0.25], abs=1e-6) and grad[2] == 0.0
    # Off (the default), the cut chunk trains like any other: 5 tokens, its G = 1 at weight 1.
    prepared, out, grad = _run(IPALossConfig(gamma=0.5), batch, LP, old)
    assert prepared.norm["rl"] == 5.0
    assert out.loss.item() == pytest.approx(-(0.5 * -1 + 0.5 * -2 + 1 * -0.5 + 1 + 1.2) / 5, abs=1e-6)
    assert grad[2] == pytest.approx(-0.2, abs=1e-6)


def test_grpo_mask_truncated_keeps_the_cut_answer_in_its_group_baseline() -> None:
    trajectories = [
        Trajectory(chunks=[_chunk(1, truncated=r == 0.0 and i == 1)], reward=r, group_id="g")
        for i, r in enumerate((1.0, 0.0, 0.0))
    ]
    lp = [-1.0, -1.0, -2.0]
    old = [-1.5, -1.0, -2.0]
    config = GRPOLossConfig(std_eps=1e-12, mask_truncated=True)
    prepared, out, grad = _run(config, pack_trajectories(trajectories), lp, old)
    a_pos, a_neg = 2 / math.sqrt(3), -1 / math.sqrt(3)  # the group still has three members
    assert prepared.chunk_advantage.tolist() == pytest.approx([a_pos, a_neg, a_neg], abs=1e-6)
    assert out.loss.item() == pytest.approx(-(1.2 * a_pos + a_neg) / 2, abs=1e-6)
    assert grad == pytest.approx([0.0, 0.0, -a_neg / 2], abs=1e-6) and grad[1] == 0.0


def test_ipa_kl_to_the_reference_on_the_policys_own_tokens_only() -> None:
    # One expert chunk (2 tokens, NLL) and one policy chunk (1 token, G = 0.5^0 * 1 = 1). The policy token:
    # log pi = -0.5, log pi_ref = -0.5 - ln 2 -> r = 0.5, k3 = 0.5 - 1 + ln 2; its gradient (1 - r) = 0.5.
    # The expert tokens' reference logprobs (-9) must not count.
    batch = pack_trajectories([Trajectory(chunks=[_chunk(2, expert=True), _chunk(1, mu=[-0.5])], reward=1.0)])
    loss_fn = build_loss(IPALossConfig(gamma=0.5, kl_coef=0.5))
    assert loss_fn.needs_reference
    prepared = loss_fn.prepare(batch).with_updates(
        ref_logprobs=_token_values(batch, [-9.0, -9.0, -0.5 - math.log(2)])
    )
    lp = _token_values(prepared, [-1.0, -2.0, -0.5], grad=True)
    out = loss_fn(prepared, lp, lp.detach())
    out.loss.backward()
    k3 = 0.5 - 1 + math.log(2)
    # L = NLL (1 + 2) / 2 + RL -(1 * -0.5) / 1 + 0.5 * k3 / 1
    assert out.loss.item() == pytest.approx(1.5 + 0.5 + 0.5 * k3, abs=1e-6)
    assert lp.grad[prepared.loss_mask].tolist() == pytest.approx([-0.5, -0.5, -1.0 + 0.5 * 0.5], abs=1e-6)
    assert out.metrics["kl_ref"].tolist() == pytest.approx([k3], abs=1e-6)


def test_only_a_positive_kl_coef_asks_for_a_reference() -> None:
    assert not build_loss(IPALossConfig()).needs_reference
    assert not build_loss(GRPOLossConfig()).needs_reference
    assert not build_loss(SFTLossConfig()).needs_reference
    assert build_loss(GRPOLossConfig(kl_coef=0.01)).needs_reference


def test_micro_batches_sum_to_the_full_batch_loss_with_a_kl_term() -> None:
    batch = _ipa_batch(negative_old=[-0.8, -1.0], negative_mu=[-0.9, -1.1])
    loss_fn = build_loss(GRPOLossConfig(kl_coef=0.3, normalization="sequence_mean"))
    prepared = loss_fn.prepare(batch).with_updates(
        ref_logprobs=_token_values(batch, [-1.5, -1.0, -0.7, -0.6, -2.0])
    )
    lp = _token_values(prepared, LP)
    old = _token_values(prepared, [-1.0, -2.0, -0.5, -0.8, -1.0])
    full = loss_fn(prepared, lp, old)
    offsets = prepared.trajectory_token_counts().cumsum(0).tolist()
    parts = [
        loss_fn(prepared.slice_trajectories(0, 1), lp[: offsets[0]], old[: offsets[0]]).loss,
        loss_fn(prepared.slice_trajectories(1, 2), lp[offsets[0] :], old[offsets[0] :]).loss,
    ]
    assert (parts[0] + parts[1]).item() == pytest.approx(full.loss.item(), abs=1e-7)
    assert full.metrics["kl_ref"].numel() == 5
