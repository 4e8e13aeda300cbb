"""Loss configs: one pydantic model per loss, chosen by `type` (a discriminated union)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

Normalization = Literal["token_mean", "sequence_mean"]


class _LossConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _RLLossConfig(_LossConfig):
    kl_coef: float = Field(
        0.0,
        ge=0.0,
        description="Weight of a k3 estimate of KL(pi_theta || pi_ref) on the policy's own trained tokens, "
        "pi_ref the policy RL started from (trainer.model, e.g. the SFT model); normalised as the policy "
        "gradient is. 0: no reference model is loaded. Torch trainer only.",
    )
    mask_truncated: bool = Field(
        False,
        description="Overlong filtering: a chunk the engine cut at its token cap takes part in neither the "
        "policy gradient nor its normaliser (its trajectory's reward still counts in the group baseline); "
        "expert chunks are never cut.",
    )


class IPALossConfig(_RLLossConfig):
    """IPA: chunk-level discounted return, chunk IS ratio and mismatch mask; imitation on expert chunks."""

    type: Literal["ipa"] = Field("ipa", description="Loss kind: ipa.")
    gamma: float = Field(0.95, gt=0.0, le=1.0, description="Chunk-level discount: G_k = gamma^(K-k) R.")
    group_baseline: bool = Field(False, description="Subtract the mean reward of the trajectory's group.")
    mismatch_high: float = Field(2.0, gt=0.0, description="H: drop chunks with exp(mean(old - mu)) > H.")
    mismatch_low: float | None = Field(None, ge=0.0, description="L: drop chunks with the ratio < L.")
    normalization: Normalization = Field("token_mean", description="token_mean or sequence_mean (per chunk).")
    lambda_il: float = Field(1.0, ge=0.0, description="Weight of the NLL on expert chunks.")
    lambda_rl: float = Field(1.0, ge=0.0, description="Weight of the chunk-level RL loss.")


class TokenReinforceLossConfig(_RLLossConfig):
    """Token-level REINFORCE: IPA's update with every token its own chunk (ablation)."""

    type: Literal["token_reinforce"] = Field("token_reinforce", description="Loss kind: token_reinforce.")
    gamma: float = Field(0.95, gt=0.0, le=1.0, description="Token-level discount: G_t = gamma^(N-t) R.")
    group_baseline: bool = Field(False, description="Subtract the mean reward of the trajectory's group.")
    mismatch_high: float = Field(2.0, gt=0.0, description="H: drop tokens with exp(old - mu) > H.")
    mismatch_low: float | None = Field(
        None, ge=0.0, description="L: drop tokens with the ratio < L; null: no lower bound."
    )
    normalization: Normalization = Field("token_mean", description="token_mean or sequence_mean.")


class GRPOLossConfig(_RLLossConfig):
    """GRPO: group-normalised trajectory advantage with the PPO clipped objective per token."""

    type: Literal["grpo"] = Field("grpo", description="Loss kind: grpo.")
    clip_low: float = Field(0.2, ge=0.0, description="Ratio clipped below at 1 - clip_low.")
    clip_high: float = Field(0.2, ge=0.0, description="Ratio clipped above at 1 + clip_high.")
    std_eps: float = Field(1e-6, gt=0.0, description="Added to the group std before dividing.")
    normalization: Normalization = Field("token_mean", description="token_mean or sequence_mean.")


class ReinforceLossConfig(_RLLossConfig):
    """Plain REINFORCE with a trajectory-level geometric-mean truncated importance weight."""

    type: Literal["reinforce"] = Field("reinforce", description="Loss kind: reinforce.")
    group_baseline: bool = Field(False, description="Subtract the mean reward of the trajectory's group.")
    is_cap: float = Field(2.0, gt=0.0, description="Truncation C of the weight: min(rho_seq, C).")
    normalization: Normalization = Field("token_mean", description="token_mean or sequence_mean.")


class SFTLossConfig(_LossConfig):
    """Error-masked SFT: failed or irrelevant chunks contribute nothing."""

    type: Literal["sft"] = Field("sft", description="Loss kind: sft.")
    eps: float = Field(1e-8, gt=0.0, description="Added to the token count in the denominator.")


LossConfig = Annotated[
    IPALossConfig | TokenReinforceLossConfig | GRPOLossConfig | ReinforceLossConfig | SFTLossConfig,
    Field(discriminator="type"),
]
