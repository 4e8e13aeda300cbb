"""One round's train step for agent-native IPA: the round's trajectories packed into one batch, the IPA loss
(`roll.algo.losses.build_loss`), `steps_per_round` optimizer steps on the torch train backend, and the
weights (with their version) for the serving engine.

Trajectories whose every chunk has return 0 (reward minus the baseline, if any, is 0: a failure without a
group baseline) get no gradient from the IPA loss, so they are left out of the batch: on this machine a
forward and backward pass over an agent context of ~2.5k tokens is the round's main cost. (Their tokens
would only have counted in the loss's token-mean normaliser.) Activation checkpointing keeps the memory of
those long contexts low.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from roll.rollout.agentic.config import IPATerminalConfig

if TYPE_CHECKING:
    from collections.abc import Mapping

    import torch

    from roll.trainer.packing import PackedBatch
    from roll.types import Trajectory


class RoundTrainer:
    """The policy's trainer: a `TorchBackend` on its own copy of the model, and the IPA loss."""

    def __init__(self, config: IPATerminalConfig) -> None:
        from roll.algo.losses import build_loss
        from roll.trainer.config import TorchBackendConfig
        from roll.trainer.torch_backend import TorchBackend

        train = config.train
        self.backend = TorchBackend(
            TorchBackendConfig(
                model=config.model,
                micro_batch_tokens=train.micro_batch_tokens,
                optimizer=train.optimizer,
                activation_checkpointing=True,
                seed=train.seed,
            )
        )
        self.loss_config = train.loss
        self.loss = build_loss(train.loss)
        self.steps = train.steps_per_round
        self.last_batch: PackedBatch | None = None

    def train(self, trajectories: list[Trajectory]) -> dict[str, Any]:
        """`steps` IPA steps on the batch of `trajectories`; pi_old is fixed at the round's first step."""
        from roll.trainer.packing import pack_trajectories

        trained = with_gradient(trajectories, self.loss_config.group_baseline)
        if not trajectories:
            raise ValueError(
                "the round produced no trajectory (no episode reached the model): check the episodes' "
                "failure modes above (sandbox, image build or agent errors)"
            )
        if not trained:
            return {
                "trajectories": len(trajectories),
                "trained_trajectories": 0,
                "imitation_trajectories": 0,
                "loss": 0.0,
                "steps": [],
                "trainer_version": self.backend.version,
            }
        batch = pack_trajectories(trained)
        expert_tokens = batch.loss_mask & batch.chunk_expert[batch.chunk_index.clamp(min=0)]
        imitating = bool(expert_tokens.any())
        if self.steps > 1 or imitating:
            batch = batch.with_updates(old_logprobs=self.backend.logprobs(batch))
        self.last_batch = batch
        steps = [self.backend.train_step(batch, self.loss) for _ in range(self.steps)]
        summary: dict[str, Any] = {}
        if imitating:
            # How much likelier the expert's chunks became: the imitation term's progress this round.
            assert batch.old_logprobs is not None
            after = self.backend.logprobs(batch)
            summary["expert_nll_before"] = float(-batch.old_logprobs[expert_tokens].mean())
            summary["expert_nll_after"] = float(-after[expert_tokens].mean())
        return {
            **summary,
            "trajectories": len(trajectories),
            "trained_trajectories": len(trained),
            "imitation_trajectories": sum(bool(t.metadata.get("imitation")) for t in trained),
            "policy_tokens": int((batch.loss_mask & ~expert_tokens).sum()),
            "expert_tokens": int(expert_tokens.sum()),
            "loss": steps[0]["loss"],
            "steps": [{k: v for k, v in s.items() if not k.endswith(("/min", "/max"))} for s in steps],
            "trainer_version": self.backend.version,
        }

    def weights(self) -> tuple[Mapping[str, torch.Tensor], int]:
        """The current weights for the engine and their version."""
        weights = self.backend.state_dict_for_inference()
        return weights.state_dict, weights.version


def with_gradient(trajectories: list[Trajectory], group_baseline: bool) -> list[Trajectory]:
    """The trajectories the IPA loss trains: expert (imitation) ones, and those whose return is not 0."""
    groups: dict[str, list[float]] = {}
    for trajectory in trajectories:
        groups.setdefault(trajectory.group_id, []).append(trajectory.reward)
    kept = []
    for trajectory in trajectories:
        rewards = groups[trajectory.group_id]
        baseline = sum(rewards) / len(rewards) if group_baseline else 0.0
        if any(chunk.expert for chunk in trajectory.chunks) or trajectory.reward != baseline:
            kept.append(trajectory)
    return kept
