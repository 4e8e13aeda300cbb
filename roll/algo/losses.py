"""The losses: IPA, its baselines (token-level REINFORCE, GRPO, plain REINFORCE) and error-masked SFT.

Every loss works in two phases so that micro-batches add up to exactly the full-batch loss:
`prepare(batch)` runs once on the whole batch (advantages and the global normalisers), then `__call__` runs on
each micro-batch (a contiguous slice of trajectories) with the current logprobs. The returned loss is that
micro-batch's share, already divided by the global normaliser, so the gradients of the shares sum to the
gradient of the batch loss.

Surrogates: a weight w (constant, or with stop-gradient) times log pi_theta has the gradient w grad log pi.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from roll.algo.config import (
    GRPOLossConfig,
    IPALossConfig,
    LossConfig,
    Normalization,
    ReinforceLossConfig,
    SFTLossConfig,
    TokenReinforceLossConfig,
)
from roll.algo.returns import chunk_returns, group_mean, group_normalized, token_returns, trajectory_values
from roll.algo.segments import segment_mean
from roll.types import PackedBatch


@dataclass
class LossOutput:
    """A micro-batch's share of the loss and per-item metric values (summarised as mean/min/max)."""

    loss: torch.Tensor
    metrics: dict[str, torch.Tensor]


class Loss(Protocol):
    def prepare(self, batch: PackedBatch) -> PackedBatch: ...

    def __call__(
        self,
        batch: PackedBatch,
        logprobs: torch.Tensor,
        old_logprobs: torch.Tensor,
        entropy: torch.Tensor | None = None,
    ) -> LossOutput: ...


def build_loss(config: LossConfig) -> Loss:
    """The loss for a config, chosen by its `type`."""
    losses: dict[type, type] = {
        IPALossConfig: IPALoss,
        TokenReinforceLossConfig: TokenReinforceLoss,
        GRPOLossConfig: GRPOLoss,
        ReinforceLossConfig: ReinforceLoss,
        SFTLossConfig: SFTLoss,
    }
    return losses[type(config)](config)


def mismatch_mask(ratio: torch.Tensor, high: float, low: float | None) -> torch.Tensor:
    """1[ratio <= H] (and ratio >= L when L is set)."""
    keep = ratio <= high
    if low is not None:
        keep = keep & (ratio >= low)
    return keep


def behaviour_logprobs(batch: PackedBatch, old_logprobs: torch.Tensor) -> torch.Tensor:
    """Engine logprobs mu; where a chunk has none, pi_old stands in (its mismatch ratio is then 1)."""
    has_mu = batch.chunk_has_engine_logprobs[batch.chunk_index.clamp(min=0)]
    return torch.where(has_mu, batch.engine_logprobs, old_logprobs)


def k3_kl(logprobs: torch.Tensor, old_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(pi_old || pi_theta): r - 1 - log r with r = pi_theta / pi_old."""
    log_r = (logprobs - old_logprobs).detach()
    return torch.exp(log_r) - 1 - log_r


def _token_scale(batch: PackedBatch, normalization: Normalization) -> torch.Tensor:
    """Per-token factor: 1 for token_mean, 1/|chunk| for sequence_mean."""
    if normalization == "token_mean":
        return torch.ones(batch.num_tokens)
    lengths = batch.chunk_lengths().to(torch.float32).clamp(min=1)
    return 1.0 / lengths[batch.chunk_index.clamp(min=0)]


def _normaliser(batch: PackedBatch, chunks: torch.Tensor, normalization: Normalization) -> float:
    """Tokens of the selected chunks (token_mean) or their number (sequence_mean), at least 1."""
    if normalization == "token_mean":
        total = float(batch.chunk_lengths()[chunks].sum())
    else:
        total = float(chunks.sum())
    return max(total, 1.0)


def _common_metrics(
    tokens: torch.Tensor, logprobs: torch.Tensor, old_logprobs: torch.Tensor, entropy: torch.Tensor | None
) -> dict[str, torch.Tensor]:
    metrics = {"kl_k3": k3_kl(logprobs[tokens], old_logprobs[tokens])}
    if entropy is not None:
        metrics["entropy"] = entropy[tokens].detach()
    return metrics


def _trajectory_rewards(batch: PackedBatch, group_baseline: bool) -> torch.Tensor:
    """Per-trajectory R, minus the mean R of its group when asked."""
    reward = trajectory_values(batch.chunk_reward, batch.chunk_traj, batch.num_trajectories)
    if not group_baseline:
        return reward
    group = trajectory_values(batch.chunk_group, batch.chunk_traj, batch.num_trajectories)
    return reward - group_mean(reward, group)


class IPALoss:
    """IPA. Positive chunks (G_c > 0): weight G_c m_c. Others: stopgrad(clip(rho_c, 0, 1)) G_c m_c.

    rho_c = exp(mean_t(log pi_theta - log pi_old)), m_c = 1[exp(mean_t(log pi_old - log mu)) <= H (>= L)],
    G_k = gamma^(K-k) (R - baseline). Loss = lambda_RL * L_RL(non-expert chunks) + lambda_IL * NLL(expert
    chunks), each normalised over the whole batch (NLL always by its token count).
    """

    def __init__(self, config: IPALossConfig) -> None:
        self.config = config

    def prepare(self, batch: PackedBatch) -> PackedBatch:
        cfg = self.config
        reward = _trajectory_rewards(batch, cfg.group_baseline)[batch.chunk_traj]
        returns = chunk_returns(reward, batch.chunk_pos, batch.chunk_count, cfg.gamma)
        norm = {
            "rl": _normaliser(batch, ~batch.chunk_expert, cfg.normalization),
            "il": _normaliser(batch, batch.chunk_expert, "token_mean"),
        }
        return batch.with_updates(chunk_advantage=returns, norm=norm)

    def __call__(
        self,
        batch: PackedBatch,
        logprobs: torch.Tensor,
        old_logprobs: torch.Tensor,
        entropy: torch.Tensor | None = None,
    ) -> LossOutput:
        cfg = self.config
        assert batch.chunk_advantage is not None, "call prepare(batch) on the full batch first"
        n, idx, mask = batch.num_chunks, batch.chunk_index, batch.loss_mask
        tok_chunk = idx.clamp(min=0)
        mu = behaviour_logprobs(batch, old_logprobs)
        rho = torch.exp(segment_mean(logprobs - old_logprobs, idx, n))
        mismatch = torch.exp(segment_mean(old_logprobs - mu, idx, n))
        keep = mismatch_mask(mismatch, cfg.mismatch_high, cfg.mismatch_low).to(logprobs.dtype)
        returns = batch.chunk_advantage.to(logprobs.dtype)
        positive = returns > 0
        is_weight = rho.detach().clamp(0.0, 1.0)
        weight = torch.where(positive, returns * keep, is_weight * returns * keep)

        rl_chunks = ~batch.chunk_expert
        rl_tokens = mask & rl_chunks[tok_chunk]
        il_tokens = mask & batch.chunk_expert[tok_chunk]
        scale = _token_scale(batch, cfg.normalization).to(logprobs.dtype)
        rl_loss = -(weight[tok_chunk] * scale * logprobs)[rl_tokens].sum() / batch.norm["rl"]
        il_loss = -logprobs[il_tokens].sum() / batch.norm["il"]
        loss = cfg.lambda_rl * rl_loss + cfg.lambda_il * il_loss

        metrics = _common_metrics(mask, logprobs, old_logprobs, entropy)
        metrics.update(
            is_ratio=rho[rl_chunks].detach(),
            mismatch_ratio=mismatch[rl_chunks].detach(),
            masked_fraction=(keep[rl_chunks] == 0).float(),
            clip_fraction=(~positive & (rho > 1))[rl_chunks].float(),
            advantage=returns[rl_chunks].detach(),
        )
        return LossOutput(loss, metrics)


class TokenReinforceLoss:
    """Token-level REINFORCE: IPA's rule with each token its own chunk.

    G_t = gamma^(N-n) (R - baseline) over the trajectory's N generated tokens, rho_t = pi_theta / pi_old,
    m_t = 1[pi_old / mu <= H (>= L)]; positive tokens weight G_t m_t, others stopgrad(min(rho_t, 1)) G_t m_t.
    """

    def __init__(self, config: TokenReinforceLossConfig) -> None:
        self.config = config

    def prepare(self, batch: PackedBatch) -> PackedBatch:
        reward = _trajectory_rewards(batch, self.config.group_baseline)
        returns = token_returns(reward, batch.token_trajectory(), batch.loss_mask, self.config.gamma)
        all_chunks = torch.ones(batch.num_chunks, dtype=torch.bool)
        norm = {"rl": _normaliser(batch, all_chunks, self.config.normalization)}
        return batch.with_updates(token_advantage=returns, norm=norm)

    def __call__(
        self,
        batch: PackedBatch,
        logprobs: torch.Tensor,
        old_logprobs: torch.Tensor,
        entropy: torch.Tensor | None = None,
    ) -> LossOutput:
        cfg = self.config
        assert batch.token_advantage is not None, "call prepare(batch) on the full batch first"
        mask = batch.loss_mask
        mu = behaviour_logprobs(batch, old_logprobs)
        rho = torch.exp(logprobs - old_logprobs)
        mismatch = torch.exp(old_logprobs - mu)
        keep = mismatch_mask(mismatch, cfg.mismatch_high, cfg.mismatch_low).to(logprobs.dtype)
        returns = batch.token_advantage.to(logprobs.dtype)
        positive = returns > 0
        weight = torch.where(positive, returns * keep, rho.detach().clamp(0.0, 1.0) * returns * keep)
        scale = _token_scale(batch, cfg.normalization).to(logprobs.dtype)
        loss = -(weight * scale * logprobs)[mask].sum() / batch.norm["rl"]
        metrics = _common_metrics(mask, logprobs, old_logprobs, entropy)
        metrics.update(
            is_ratio=rho[mask].detach(),
            mismatch_ratio=mismatch[mask].detach(),
            masked_fraction=(keep[mask] == 0).float(),
            clip_fraction=(~positive & (rho > 1))[mask].float(),
            advantage=returns[mask].detach(),
        )
        return LossOutput(loss, metrics)


class GRPOLoss:
    """GRPO: A = (R - mean_g) / (std_g + eps) per trajectory; per token -min(r A, clip(r, 1-lo, 1+hi) A)."""

    def __init__(self, config: GRPOLossConfig) -> None:
        self.config = config

    def prepare(self, batch: PackedBatch) -> PackedBatch:
        reward = _trajectory_rewards(batch, group_baseline=False)
        group = trajectory_values(batch.chunk_group, batch.chunk_traj, batch.num_trajectories)
        advantage = group_normalized(reward, group, self.config.std_eps)[batch.chunk_traj]
        all_chunks = torch.ones(batch.num_chunks, dtype=torch.bool)
        norm = {"rl": _normaliser(batch, all_chunks, self.config.normalization)}
        return batch.with_updates(chunk_advantage=advantage, norm=norm)

    def __call__(
        self,
        batch: PackedBatch,
        logprobs: torch.Tensor,
        old_logprobs: torch.Tensor,
        entropy: torch.Tensor | None = None,
    ) -> LossOutput:
        cfg = self.config
        assert batch.chunk_advantage is not None, "call prepare(batch) on the full batch first"
        mask = batch.loss_mask
        advantage = batch.chunk_advantage.to(logprobs.dtype)[batch.chunk_index.clamp(min=0)]
        ratio = torch.exp(logprobs - old_logprobs)
        clipped_ratio = ratio.clamp(1 - cfg.clip_low, 1 + cfg.clip_high)
        surrogate = torch.minimum(ratio * advantage, clipped_ratio * advantage)
        scale = _token_scale(batch, cfg.normalization).to(logprobs.dtype)
        loss = -(surrogate * scale)[mask].sum() / batch.norm["rl"]
        clipped_up = (ratio > 1 + cfg.clip_high) & (advantage > 0)
        clipped = clipped_up | ((ratio < 1 - cfg.clip_low) & (advantage < 0))
        metrics = _common_metrics(mask, logprobs, old_logprobs, entropy)
        metrics.update(
            is_ratio=ratio[mask].detach(),
            clip_fraction=clipped[mask].float(),
            advantage=advantage[mask].detach(),
        )
        return LossOutput(loss, metrics)


class ReinforceLoss:
    """Plain REINFORCE: weight stopgrad(min(rho_s, C)) (R - baseline) on every generated token of a
    trajectory, rho_s = exp(mean over the trajectory's generated tokens of (log pi_theta - log mu))."""

    def __init__(self, config: ReinforceLossConfig) -> None:
        self.config = config

    def prepare(self, batch: PackedBatch) -> PackedBatch:
        advantage = _trajectory_rewards(batch, self.config.group_baseline)[batch.chunk_traj]
        all_chunks = torch.ones(batch.num_chunks, dtype=torch.bool)
        norm = {"rl": _normaliser(batch, all_chunks, self.config.normalization)}
        return batch.with_updates(chunk_advantage=advantage, norm=norm)

    def __call__(
        self,
        batch: PackedBatch,
        logprobs: torch.Tensor,
        old_logprobs: torch.Tensor,
        entropy: torch.Tensor | None = None,
    ) -> LossOutput:
        cfg = self.config
        assert batch.chunk_advantage is not None, "call prepare(batch) on the full batch first"
        mask = batch.loss_mask
        token_traj = torch.where(mask, batch.token_trajectory(), -1)
        mu = behaviour_logprobs(batch, old_logprobs)
        rho = torch.exp(segment_mean(logprobs - mu, token_traj, batch.num_trajectories))
        traj_adv = trajectory_values(batch.chunk_advantage, batch.chunk_traj, batch.num_trajectories)
        weight = rho.detach().clamp(max=cfg.is_cap) * traj_adv.to(logprobs.dtype)
        scale = _token_scale(batch, cfg.normalization).to(logprobs.dtype)
        loss = -(weight[token_traj.clamp(min=0)] * scale * logprobs)[mask].sum() / batch.norm["rl"]
        metrics = _common_metrics(mask, logprobs, old_logprobs, entropy)
        metrics.update(
            is_ratio=rho.detach(),
            clip_fraction=(rho > cfg.is_cap).float(),
            advantage=traj_adv.detach(),
        )
        return LossOutput(loss, metrics)


class SFTLoss:
    """Error-masked SFT: -sum_k m_k log pi(c_k | s_k) / (sum_k m_k |c_k| + eps), m_k = !error * relevant."""

    def __init__(self, config: SFTLossConfig) -> None:
        self.config = config

    def prepare(self, batch: PackedBatch) -> PackedBatch:
        keep = ~batch.chunk_error & batch.chunk_relevant
        tokens = float(batch.chunk_lengths()[keep].sum())
        return batch.with_updates(norm={"sft": tokens + self.config.eps})

    def __call__(
        self,
        batch: PackedBatch,
        logprobs: torch.Tensor,
        old_logprobs: torch.Tensor,
        entropy: torch.Tensor | None = None,
    ) -> LossOutput:
        keep = ~batch.chunk_error & batch.chunk_relevant
        tokens = batch.loss_mask & keep[batch.chunk_index.clamp(min=0)]
        loss = -logprobs[tokens].sum() / batch.norm["sft"]
        metrics = _common_metrics(tokens, logprobs, old_logprobs, entropy)
        metrics.update(nll=-logprobs[tokens].detach(), masked_fraction=(~keep).float())
        return LossOutput(loss, metrics)


def summarize(metrics: list[dict[str, torch.Tensor]]) -> dict[str, float]:
    """Mean/min/max of every metric over the per-item values of several micro-batches."""
    out: dict[str, float] = {}
    names = sorted({name for m in metrics for name in m})
    for name in names:
        values = torch.cat([m[name].flatten().float() for m in metrics if name in m])
        if values.numel() == 0:
            continue
        out[f"{name}/mean"] = float(values.mean())
        out[f"{name}/min"] = float(values.min())
        out[f"{name}/max"] = float(values.max())
    return out
