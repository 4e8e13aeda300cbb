"""The losses: IPA, its baselines (token-level REINFORCE, GRPO, plain REINFORCE) and error-masked SFT.

Every loss works in two phases so that micro-batches add up to exactly the full-batch loss:
`prepare(batch)` runs once on the whole batch (advantages and the global normalisers), then `__call__` runs on
each micro-batch (a contiguous slice of trajectories) with the current logprobs. The returned loss is that
micro-batch's share, already divided by the global normaliser, so the gradients of the shares sum to the
gradient of the batch loss.

Surrogates: a weight w (constant, or with stop-gradient) times log pi_theta has the gradient w grad log pi.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Protocol

import torch

from roll.algo.batch import PackedBatch
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


@dataclass
class LossOutput:
    """A micro-batch's share of the loss and per-item metric values (summarised as mean/min/max)."""

    loss: torch.Tensor
    metrics: dict[str, torch.Tensor]


class Loss(Protocol):
    # True when __call__ reads batch.ref_logprobs (the reference policy's logprobs), which the trainer sets.
    needs_reference: bool

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


def positive_full_rate_weight(
    rho: torch.Tensor, mismatch: torch.Tensor, returns: torch.Tensor, high: float, low: float | None
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """IPA's weighting rule on any unit (a chunk, or a token for token-level REINFORCE).

    Units with G > 0 weight G m; the others stopgrad(clip(rho, 0, 1)) G m, where m is the mismatch mask
    1[mismatch <= H (>= L)]. Returns the per-unit weights and per-unit metrics for the caller to select from.
    """
    keep = mismatch_mask(mismatch, high, low).to(rho.dtype)
    positive = returns > 0
    weight = torch.where(positive, returns * keep, rho.detach().clamp(0.0, 1.0) * returns * keep)
    metrics = {
        "is_ratio": rho.detach(),
        "mismatch_ratio": mismatch.detach(),
        "masked_fraction": (keep == 0).float(),
        "clip_fraction": (~positive & (rho > 1)).float(),
        "advantage": returns.detach(),
    }
    return weight, metrics


def _k3(log_r: torch.Tensor) -> torch.Tensor:
    """The k3 KL estimator r - 1 - log r, per token."""
    return torch.exp(log_r) - 1 - log_r


def k3_kl(logprobs: torch.Tensor, old_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(pi_old || pi_theta) with r = pi_theta / pi_old (a metric: no gradient)."""
    return _k3((logprobs - old_logprobs).detach())


def reference_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(pi_theta || pi_ref) with r = pi_ref / pi_theta, differentiable in
    logprobs (its gradient is (1 - r) grad log pi_theta)."""
    return _k3(ref_logprobs - logprobs)


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


def chunk_tokens(batch: PackedBatch, chunks: torch.Tensor) -> torch.Tensor:
    """[T] bool: the generated tokens of the selected chunks ([C] bool)."""
    return batch.loss_mask & chunks[batch.chunk_index.clamp(min=0)]


def _trajectory_rewards(batch: PackedBatch, group_baseline: bool) -> torch.Tensor:
    """Per-trajectory R, minus the mean R of its group when asked."""
    reward = trajectory_values(batch.chunk_reward, batch.chunk_traj, batch.num_trajectories)
    if not group_baseline:
        return reward
    group = trajectory_values(batch.chunk_group, batch.chunk_traj, batch.num_trajectories)
    return reward - group_mean(reward, group)


class _MaskedLoss(ABC):
    """The call path every loss shares.

    Only the generated tokens of trained chunks count: by default the relevant ones (the task-aware context
    mask drops a chunk from every loss, numerator and normaliser alike). `prepare` must have set the loss's
    normalisers; the common metrics (k3 KL, entropy) are taken over the trained tokens.
    """

    norm_key: str
    needs_reference = False

    def trained_chunks(self, batch: PackedBatch) -> torch.Tensor:
        return batch.chunk_relevant

    def __call__(
        self,
        batch: PackedBatch,
        logprobs: torch.Tensor,
        old_logprobs: torch.Tensor,
        entropy: torch.Tensor | None = None,
    ) -> LossOutput:
        assert self.norm_key in batch.norm, "call prepare(batch) on the full batch first"
        chunks = self.trained_chunks(batch)
        tokens = chunk_tokens(batch, chunks)
        loss, metrics = self.masked_loss(batch, chunks, tokens, logprobs, old_logprobs)
        common = {"kl_k3": k3_kl(logprobs[tokens], old_logprobs[tokens])}
        if entropy is not None:
            common["entropy"] = entropy[tokens].detach()
        if self.needs_reference:
            kl_loss, common["kl_ref"] = self.reference_loss(batch, logprobs)
            loss = loss + kl_loss
        return LossOutput(loss, {**common, **metrics})

    def reference_loss(self, batch: PackedBatch, logprobs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The micro-batch's share of the KL term and its per-token values; only losses that set
        needs_reference have one."""
        raise NotImplementedError(f"{type(self).__name__} has no KL term to a reference policy")

    @abstractmethod
    def masked_loss(
        self,
        batch: PackedBatch,
        chunks: torch.Tensor,
        tokens: torch.Tensor,
        logprobs: torch.Tensor,
        old_logprobs: torch.Tensor,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The micro-batch's loss share over `tokens` (of `chunks`), and the loss's own metrics."""


class _RLLoss(_MaskedLoss):
    """A policy-gradient loss normalised over the generated tokens (or the number) of the relevant chunks
    (less those cut at the token cap, with mask_truncated), plus kl_coef times the k3 KL to the reference
    policy on the policy's own trained tokens, normalised the same way."""

    norm_key = "rl"

    def __init__(self, normalization: Normalization, kl_coef: float, mask_truncated: bool) -> None:
        self.normalization = normalization
        self.kl_coef = kl_coef
        self.needs_reference = kl_coef > 0
        self.mask_truncated = mask_truncated

    def trained_chunks(self, batch: PackedBatch) -> torch.Tensor:
        relevant = super().trained_chunks(batch)
        return relevant & ~batch.chunk_truncated if self.mask_truncated else relevant

    def policy_chunks(self, batch: PackedBatch) -> torch.Tensor:
        """[C] bool: the trained chunks the policy generated (the policy-gradient term's chunks)."""
        return self.trained_chunks(batch)

    def reference_loss(self, batch: PackedBatch, logprobs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        assert batch.ref_logprobs is not None, "kl_coef > 0: the trainer must set batch.ref_logprobs"
        tokens = chunk_tokens(batch, self.policy_chunks(batch))
        kl = reference_kl(logprobs, batch.ref_logprobs.to(logprobs.dtype))
        kl_loss = (kl * self.scale(batch, logprobs.dtype))[tokens].sum() / batch.norm["rl"]
        return self.kl_coef * kl_loss, kl[tokens].detach()

    def prepared(self, batch: PackedBatch, **advantages: torch.Tensor) -> PackedBatch:
        norm = {"rl": _normaliser(batch, self.trained_chunks(batch), self.normalization)}
        return batch.with_updates(norm=norm, **advantages)

    def scale(self, batch: PackedBatch, dtype: torch.dtype) -> torch.Tensor:
        return _token_scale(batch, self.normalization).to(dtype)


class IPALoss(_RLLoss):
    """IPA. Positive chunks (G_c > 0): weight G_c m_c. Others: stopgrad(clip(rho_c, 0, 1)) G_c m_c.

    rho_c = exp(mean_t(log pi_theta - log pi_old)), m_c = 1[exp(mean_t(log pi_old - log mu)) <= H (>= L)],
    G_k = gamma^(K-k) (R - baseline), k and K counting every chunk of the trajectory. Loss = lambda_RL *
    L_RL(non-expert chunks) + lambda_IL * NLL(expert chunks), each normalised over the whole batch (NLL always
    by its token count). Chunks marked not relevant take part in neither.
    """

    def __init__(self, config: IPALossConfig) -> None:
        super().__init__(config.normalization, config.kl_coef, config.mask_truncated)
        self.config = config

    def policy_chunks(self, batch: PackedBatch) -> torch.Tensor:
        return self.trained_chunks(batch) & ~batch.chunk_expert

    def prepare(self, batch: PackedBatch) -> PackedBatch:
        cfg = self.config
        reward = _trajectory_rewards(batch, cfg.group_baseline)[batch.chunk_traj]
        returns = chunk_returns(reward, batch.chunk_pos, batch.chunk_count, cfg.gamma)
        relevant = self.trained_chunks(batch)
        norm = {
            "rl": _normaliser(batch, self.policy_chunks(batch), cfg.normalization),
            "il": _normaliser(batch, relevant & batch.chunk_expert, "token_mean"),
        }
        return batch.with_updates(chunk_advantage=returns, norm=norm)

    def masked_loss(
        self,
        batch: PackedBatch,
        chunks: torch.Tensor,
        tokens: torch.Tensor,
        logprobs: torch.Tensor,
        old_logprobs: torch.Tensor,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        cfg = self.config
        assert batch.chunk_advantage is not None, "call prepare(batch) on the full batch first"
        n, idx = batch.num_chunks, batch.chunk_index
        mu = behaviour_logprobs(batch, old_logprobs)
        rho = torch.exp(segment_mean(logprobs - old_logprobs, idx, n))
        mismatch = torch.exp(segment_mean(old_logprobs - mu, idx, n))
        returns = batch.chunk_advantage.to(logprobs.dtype)
        weight, unit_metrics = positive_full_rate_weight(
            rho, mismatch, returns, cfg.mismatch_high, cfg.mismatch_low
        )
        rl_chunks = self.policy_chunks(batch)
        rl_tokens = chunk_tokens(batch, rl_chunks)
        il_tokens = chunk_tokens(batch, chunks & batch.chunk_expert)
        token_weight = weight[idx.clamp(min=0)] * self.scale(batch, logprobs.dtype)
        rl_loss = -(token_weight * logprobs)[rl_tokens].sum() / batch.norm["rl"]
        il_loss = -logprobs[il_tokens].sum() / batch.norm["il"]
        loss = cfg.lambda_rl * rl_loss + cfg.lambda_il * il_loss
        return loss, {name: values[rl_chunks] for name, values in unit_metrics.items()}


class TokenReinforceLoss(_RLLoss):
    """Token-level REINFORCE: IPA's rule with each token its own chunk.

    G_t = gamma^(N-n) (R - baseline) over the trajectory's N generated tokens, rho_t = pi_theta / pi_old,
    m_t = 1[pi_old / mu <= H (>= L)]; positive tokens weight G_t m_t, others stopgrad(min(rho_t, 1)) G_t m_t.
    """

    def __init__(self, config: TokenReinforceLossConfig) -> None:
        super().__init__(config.normalization, config.kl_coef, config.mask_truncated)
        self.config = config

    def prepare(self, batch: PackedBatch) -> PackedBatch:
        reward = _trajectory_rewards(batch, self.config.group_baseline)
        returns = token_returns(reward, batch.token_trajectory(), batch.loss_mask, self.config.gamma)
        return self.prepared(batch, token_advantage=returns)

    def masked_loss(
        self,
        batch: PackedBatch,
        chunks: torch.Tensor,
        tokens: torch.Tensor,
        logprobs: torch.Tensor,
        old_logprobs: torch.Tensor,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        cfg = self.config
        assert batch.token_advantage is not None, "call prepare(batch) on the full batch first"
        mu = behaviour_logprobs(batch, old_logprobs)
        rho = torch.exp(logprobs - old_logprobs)
        mismatch = torch.exp(old_logprobs - mu)
        returns = batch.token_advantage.to(logprobs.dtype)
        weight, unit_metrics = positive_full_rate_weight(
            rho, mismatch, returns, cfg.mismatch_high, cfg.mismatch_low
        )
        loss = -(weight * self.scale(batch, logprobs.dtype) * logprobs)[tokens].sum() / batch.norm["rl"]
        return loss, {name: values[tokens] for name, values in unit_metrics.items()}


class GRPOLoss(_RLLoss):
    """GRPO: A = (R - mean_g) / (std_g + eps) per trajectory; per token -min(r A, clip(r, 1-lo, 1+hi) A)."""

    def __init__(self, config: GRPOLossConfig) -> None:
        super().__init__(config.normalization, config.kl_coef, config.mask_truncated)
        self.config = config

    def prepare(self, batch: PackedBatch) -> PackedBatch:
        reward = _trajectory_rewards(batch, group_baseline=False)
        group = trajectory_values(batch.chunk_group, batch.chunk_traj, batch.num_trajectories)
        advantage = group_normalized(reward, group, self.config.std_eps)[batch.chunk_traj]
        return self.prepared(batch, chunk_advantage=advantage)

    def masked_loss(
        self,
        batch: PackedBatch,
        chunks: torch.Tensor,
        tokens: torch.Tensor,
        logprobs: torch.Tensor,
        old_logprobs: torch.Tensor,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        cfg = self.config
        assert batch.chunk_advantage is not None, "call prepare(batch) on the full batch first"
        advantage = batch.chunk_advantage.to(logprobs.dtype)[batch.chunk_index.clamp(min=0)]
        ratio = torch.exp(logprobs - old_logprobs)
        clipped_ratio = ratio.clamp(1 - cfg.clip_low, 1 + cfg.clip_high)
        surrogate = torch.minimum(ratio * advantage, clipped_ratio * advantage)
        loss = -(surrogate * self.scale(batch, logprobs.dtype))[tokens].sum() / batch.norm["rl"]
        clipped_up = (ratio > 1 + cfg.clip_high) & (advantage > 0)
        clipped = clipped_up | ((ratio < 1 - cfg.clip_low) & (advantage < 0))
        metrics = {
            "is_ratio": ratio[tokens].detach(),
            "clip_fraction": clipped[tokens].float(),
            "advantage": advantage[tokens].detach(),
        }
        return loss, metrics


class ReinforceLoss(_RLLoss):
    """Plain REINFORCE: weight stopgrad(min(rho_s, C)) (R - baseline) on every trained token of a trajectory,
    rho_s = exp(mean over the trajectory's trained (relevant) generated tokens of (log pi_theta - log mu))."""

    def __init__(self, config: ReinforceLossConfig) -> None:
        super().__init__(config.normalization, config.kl_coef, config.mask_truncated)
        self.config = config

    def prepare(self, batch: PackedBatch) -> PackedBatch:
        advantage = _trajectory_rewards(batch, self.config.group_baseline)[batch.chunk_traj]
        return self.prepared(batch, chunk_advantage=advantage)

    def masked_loss(
        self,
        batch: PackedBatch,
        chunks: torch.Tensor,
        tokens: torch.Tensor,
        logprobs: torch.Tensor,
        old_logprobs: torch.Tensor,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        assert batch.chunk_advantage is not None, "call prepare(batch) on the full batch first"
        token_traj = torch.where(tokens, batch.token_trajectory(), -1)
        mu = behaviour_logprobs(batch, old_logprobs)
        rho = torch.exp(segment_mean(logprobs - mu, token_traj, batch.num_trajectories))
        traj_adv = trajectory_values(batch.chunk_advantage, batch.chunk_traj, batch.num_trajectories)
        weight = rho.detach().clamp(max=self.config.is_cap) * traj_adv.to(logprobs.dtype)
        token_weight = weight[token_traj.clamp(min=0)] * self.scale(batch, logprobs.dtype)
        loss = -(token_weight * logprobs)[tokens].sum() / batch.norm["rl"]
        metrics = {
            "is_ratio": rho.detach(),
            "clip_fraction": (rho > self.config.is_cap).float(),
            "advantage": traj_adv.detach(),
        }
        return loss, metrics


class SFTLoss(_MaskedLoss):
    """Error-masked SFT: -sum_k m_k log pi(c_k | s_k) / (sum_k m_k |c_k| + eps), m_k = !error * relevant."""

    norm_key = "sft"

    def __init__(self, config: SFTLossConfig) -> None:
        self.config = config

    def trained_chunks(self, batch: PackedBatch) -> torch.Tensor:
        return ~batch.chunk_error & batch.chunk_relevant

    def prepare(self, batch: PackedBatch) -> PackedBatch:
        tokens = float(batch.chunk_lengths()[self.trained_chunks(batch)].sum())
        return batch.with_updates(norm={"sft": tokens + self.config.eps})

    def masked_loss(
        self,
        batch: PackedBatch,
        chunks: torch.Tensor,
        tokens: torch.Tensor,
        logprobs: torch.Tensor,
        old_logprobs: torch.Tensor,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        loss = -logprobs[tokens].sum() / batch.norm["sft"]
        return loss, {"nll": -logprobs[tokens].detach(), "masked_fraction": (~chunks).float()}


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
