"""The embedded train backend: a transformers causal LM trained with plain torch.

Padding-free packed forward, micro-batches by token budget with gradient accumulation, AdamW, gradient
clipping, LR schedule, float32 or bf16 autocast, optional activation checkpointing, and FSDP2 when a process
group with more than one rank is initialised (gloo on CPU works).

Distributed runs get the same full batch on every rank; micro-batch i runs on rank i % world, and every loss
share is multiplied by the world size because FSDP averages gradients over ranks. So the update equals the
single-process one.
"""

from __future__ import annotations

import contextlib
import json
import random
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.distributed as dist

from roll.algo.batch import PackedBatch
from roll.algo.losses import Loss, summarize
from roll.trainer.config import TorchBackendConfig
from roll.trainer.distributed import full_tensor, gather_objects, shard_model, world
from roll.trainer.forward import VARLEN, packed_logprobs, padded_logprobs, use_varlen_attention
from roll.trainer.micro_batches import plan_micro_batches
from roll.trainer.protocol import InferenceWeights
from roll.trainer.schedule import lr_factor

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

STATE_FILE = "trainer_state.pt"
META_FILE = "checkpoint.json"


class TorchBackend:
    """`TrainBackend` on a transformers model; pass `model` (and `tokenizer`) to skip loading config.model.

    A loss with a KL term (`needs_reference`) gets the logprobs of a frozen reference policy: `reference`
    when given, else config.model loaded again at the first such step (the weights RL started from, also
    after `load` restored later ones). On several ranks each keeps a whole unsharded copy for its
    micro-batches."""

    def __init__(
        self,
        config: TorchBackendConfig,
        model: PreTrainedModel | None = None,
        tokenizer: PreTrainedTokenizerBase | None = None,
        reference: PreTrainedModel | None = None,
    ) -> None:
        self.config = config
        self.rank, self.world_size = world()
        self.device = torch.device(config.device)
        torch.manual_seed(config.seed)
        if model is None:
            from roll.models import load_model

            loaded = load_model(config.model, dtype=torch.float32, device=config.device)
            model, tokenizer = loaded.model, loaded.tokenizer
        self.model = model.to(self.device)
        self._reference = None if reference is None else self._frozen(reference)
        self.tokenizer = tokenizer
        # The varlen attention computes a start the sequences share once; flash-attention does not.
        self._shared_prefix = 0
        if config.packing and use_varlen_attention(self.model, self.device) == VARLEN:
            self._shared_prefix = config.shared_prefix_tokens
        if config.activation_checkpointing:
            self.model.activation_checkpointing_enable({"use_reentrant": False})
        if self.world_size > 1:
            shard_model(self.model)
        opt = config.optimizer
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(), lr=opt.lr, betas=opt.betas, eps=opt.eps, weight_decay=opt.weight_decay
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, partial(lr_factor, config.schedule)
        )
        self.step = 0
        self.version = 0

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        if self.config.dtype == "bfloat16":
            return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _forward(
        self, batch: PackedBatch, with_entropy: bool, model: PreTrainedModel | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        with self._autocast():
            if self.config.packing:
                logprobs, entropy = packed_logprobs(
                    model or self.model, batch, self.device, with_entropy, self._shared_prefix
                )
            else:
                logprobs, entropy = padded_logprobs(model or self.model, batch, self.device, with_entropy)
        return logprobs.float().cpu(), None if entropy is None else entropy.float().cpu()

    def _frozen(self, model: PreTrainedModel) -> PreTrainedModel:
        model.to(self.device).eval().requires_grad_(False)
        if self.config.packing:
            use_varlen_attention(model, self.device)
        return model

    def _reference_model(self) -> PreTrainedModel:
        if self._reference is None:
            from roll.models import load_model

            loaded = load_model(self.config.model, dtype=torch.float32, device=self.config.device)
            self._reference = self._frozen(loaded.model)
        return self._reference

    @torch.no_grad()
    def _with_reference(self, micro: PackedBatch) -> PackedBatch:
        return micro.with_updates(ref_logprobs=self._forward(micro, False, self._reference_model())[0])

    def _my_micro_batches(self, batch: PackedBatch) -> tuple[list[tuple[int, int]], int]:
        """This rank's trajectory ranges, and how many idle passes it must add to keep ranks in step."""
        plan = plan_micro_batches(
            batch,
            self.config.micro_batch_tokens,
            padded=not self.config.packing,
            shared_prefix=self._shared_prefix,
        )
        mine = plan[self.rank :: self.world_size]
        rounds = -(-len(plan) // self.world_size)
        return mine, rounds - len(mine)

    @torch.no_grad()
    def logprobs(self, batch: PackedBatch) -> torch.Tensor:
        """Per-token logprobs [T] under the current weights (0 off the loss mask)."""
        self.model.eval()
        mine, idle = self._my_micro_batches(batch)
        parts = [
            (start, end, self._forward(batch.slice_trajectories(start, end), False)[0]) for start, end in mine
        ]
        for _ in range(idle):
            self._forward(batch.slice_trajectories(0, 1), False)
        offsets = torch.cat([torch.zeros(1, dtype=torch.long), batch.trajectory_token_counts().cumsum(0)])
        out = torch.zeros(batch.num_tokens)
        for rank_parts in gather_objects(parts):
            for start, end, values in rank_parts:
                out[int(offsets[start]) : int(offsets[end])] = values
        return out

    def train_step(self, batch: PackedBatch, loss: Loss) -> dict[str, float]:
        """One optimizer step on the whole batch. pi_old is `batch.old_logprobs` if set, else the current
        logprobs (equal in value: all micro-batches of a step run on the same weights)."""
        self.model.train()
        prepared = loss.prepare(batch)
        mine, idle = self._my_micro_batches(prepared)
        loss_sum = torch.zeros(())
        metrics: list[dict[str, torch.Tensor]] = []
        for start, end in mine:
            micro = prepared.slice_trajectories(start, end)
            if loss.needs_reference:
                micro = self._with_reference(micro)
            logprobs, entropy = self._forward(micro, self.config.compute_entropy)
            old = micro.old_logprobs if micro.old_logprobs is not None else logprobs.detach()
            out = loss(micro, logprobs, old, entropy)
            (out.loss * self.world_size).backward()
            loss_sum += out.loss.detach()
            metrics.append(out.metrics)
        for _ in range(idle):
            logprobs, _ = self._forward(prepared.slice_trajectories(0, 1), False)
            (logprobs.sum() * 0.0).backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.optimizer.grad_clip)
        lr = self.scheduler.get_last_lr()[0]
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        self.version += 1
        if self.world_size > 1:
            dist.all_reduce(loss_sum)
        all_metrics = [m for rank_metrics in gather_objects(metrics) for m in rank_metrics]
        return {
            "loss": float(loss_sum),
            "grad_norm": float(full_tensor(grad_norm)),
            "lr": lr,
            "step": self.step,
            "tokens": batch.num_tokens,
            "loss_tokens": batch.num_loss_tokens,
            **summarize(all_metrics),
        }

    def _full_model_state(self) -> dict[str, torch.Tensor]:
        if self.world_size == 1:
            return {k: v.detach() for k, v in self.model.state_dict().items()}
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        return get_model_state_dict(self.model, options=StateDictOptions(full_state_dict=True))

    def state_dict_for_inference(self) -> InferenceWeights:
        """Full weights on every rank, tagged with the current version."""
        return InferenceWeights(state_dict=self._full_model_state(), version=self.version)

    def save(self, directory: Path) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        state = {
            "model": self._full_model_state(),
            "optimizer": self._optimizer_state(),
            "scheduler": self.scheduler.state_dict(),
            "step": self.step,
            "version": self.version,
        }
        rng = {
            "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            "python": random.getstate(),
            "numpy": np.random.get_state(),
        }
        torch.save(rng, directory / f"rng_rank{self.rank}.pt")
        if self.rank == 0:
            torch.save(state, directory / STATE_FILE)
            meta = {"step": self.step, "version": self.version, "world_size": self.world_size}
            (directory / META_FILE).write_text(json.dumps(meta))
        if self.world_size > 1:
            dist.barrier()

    def _optimizer_state(self) -> dict[str, Any]:
        if self.world_size == 1:
            return self.optimizer.state_dict()
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

        options = StateDictOptions(full_state_dict=True)
        return get_optimizer_state_dict(self.model, self.optimizer, options=options)

    def load(self, directory: Path) -> None:
        directory = Path(directory)
        if not (directory / META_FILE).is_file():
            raise FileNotFoundError(
                f"{directory} holds no complete checkpoint ({META_FILE} missing); "
                "pass a directory written by save()"
            )
        state = torch.load(directory / STATE_FILE, map_location="cpu", weights_only=False)
        if self.world_size == 1:
            self.model.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
        else:
            from torch.distributed.checkpoint.state_dict import (
                StateDictOptions,
                set_model_state_dict,
                set_optimizer_state_dict,
            )

            options = StateDictOptions(full_state_dict=True)
            set_model_state_dict(self.model, state["model"], options=options)
            set_optimizer_state_dict(self.model, self.optimizer, state["optimizer"], options=options)
        self.scheduler.load_state_dict(state["scheduler"])
        self.step, self.version = int(state["step"]), int(state["version"])
        rng_file = directory / f"rng_rank{self.rank}.pt"
        if rng_file.is_file():
            rng = torch.load(rng_file, weights_only=False)
            torch.set_rng_state(rng["torch"])
            if rng["cuda"] is not None and torch.cuda.is_available():
                torch.cuda.set_rng_state_all(rng["cuda"])
            random.setstate(rng["python"])
            np.random.set_state(rng["numpy"])

    def export_hf(self, directory: Path) -> None:
        """Hugging Face folder (config, safetensors, tokenizer), written by rank 0."""
        state = self._full_model_state()
        if self.rank == 0:
            directory = Path(directory)
            unwrapped = self.model
            unwrapped.save_pretrained(directory, state_dict={k: v.contiguous() for k, v in state.items()})
            if self.tokenizer is not None:
                self.tokenizer.save_pretrained(directory)
        if self.world_size > 1:
            dist.barrier()
