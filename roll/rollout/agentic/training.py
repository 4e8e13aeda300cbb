"""One round's train step for agent-native IPA: the round's trajectories packed into one batch, the IPA loss
(`roll.algo.losses.build_loss`), `steps_per_round` optimizer steps on the torch train backend, and the
weights (with their version) for the serving engine."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from roll.rollout.agentic.config import IPATerminalConfig

if TYPE_CHECKING:
    from collections.abc import Mapping

    import torch

    from roll.types import PackedBatch, Trajectory


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
                seed=train.seed,
            )
        )
        self.loss = build_loss(train.loss)
        self.steps = train.steps_per_round
        self.last_batch: PackedBatch | None = None

    def train(self, trajectories: list[Trajectory]) -> dict[str, Any]:
        """`steps` IPA steps on the batch of `trajectories`; pi_old is fixed at the round's first step."""
        from roll.types import pack_trajectories

        if not trajectories:
            raise ValueError(
                "the round produced no trajectory (no episode reached the model): check the episodes' "
                "failure modes above (sandbox, image build or agent errors)"
            )
        batch = pack_trajectories(trajectories)
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
            "imitation_trajectories": sum(bool(t.metadata.get("imitation")) for t in trajectories),
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
