"""`TrainBackend` on megatron-core: a Hugging Face model trained with tensor/pipeline/expert/context
parallelism.

Launch one process per GPU (torchrun or Ray workers setting RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and
MASTER_PORT); a single process without them runs alone. Every rank gets the same full batch: micro-batches
(whole trajectories within `micro_batch_tokens`) are dealt to data parallel ranks, and the pipeline schedule
of megatron-core runs them. Each micro-batch's loss is its share of the whole batch's loss, multiplied by
the number of micro-batches and data parallel ranks because megatron-core divides by both; so one step is
the same update as the torch backend's. Under context parallelism the ranks of a CP group share each
micro-batch's tokens and gather its logprobs back (`context_parallel`), so the loss code is the same; each
CP rank's gradient comes from its own tokens, megatron-core multiplies the loss by the CP size and averages
gradients over data x context parallel ranks, which cancel.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from roll.algo.losses import summarize
from roll.models.layout import to_transformers_layout
from roll.trainer.distributed import gather_objects
from roll.trainer.megatron.checkpoint import load_checkpoint, save_checkpoint
from roll.trainer.megatron.config import MegatronBackendConfig, check_against_model
from roll.trainer.megatron.context_parallel import row_length
from roll.trainer.megatron.forward import packed_inputs, token_logprobs
from roll.trainer.megatron.mapping import ModelShape
from roll.trainer.megatron.weight_sync import broadcast_buckets, init_weight_group, weight_specs
from roll.trainer.megatron.weights import (
    DEFAULT_BUCKET_BYTES,
    gather_hf_buckets,
    load_hf_weights,
    save_hf_folder,
)
from roll.trainer.micro_batches import plan_micro_batches
from roll.trainer.protocol import InferenceWeights
from roll.trainer.schedule import lr_factor

if TYPE_CHECKING:
    from roll.algo.batch import PackedBatch
    from roll.algo.losses import Loss, LossOutput
    from roll.trainer.megatron.context_parallel import ContextShard
    from roll.types import TensorSpec


class MegatronNeedsCudaError(RuntimeError):
    """The megatron backend was asked for on a machine without a CUDA GPU."""


def require_cuda() -> None:
    """A clear error on a machine where the backend cannot run: no CUDA GPU, or no megatron-core."""
    if not torch.cuda.is_available():
        raise MegatronNeedsCudaError(
            "the megatron train backend needs a CUDA GPU and torch.cuda.is_available() is False here; "
            "set trainer.type: torch to train on this machine (CPU, one GPU or FSDP2), as "
            "configs/gem_guess_the_number.yaml and configs/sft.yaml do"
        )
    if importlib.util.find_spec("megatron") is None:
        raise MegatronNeedsCudaError(
            "the megatron train backend needs megatron-core, which is not installed: pip install 'ale[gpu]' "
            "on this GPU machine, or set trainer.type: torch"
        )


def _init_process_group() -> None:
    if dist.is_initialized():
        return
    if "RANK" not in os.environ:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(port))
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl")


def initialize_parallel(config: MegatronBackendConfig) -> None:
    """megatron-core's model-parallel groups for the config's layout (once per process), and its seeds."""
    from megatron.core import parallel_state as ps
    from megatron.core.tensor_parallel import model_parallel_cuda_manual_seed

    if not ps.model_parallel_is_initialized():
        ps.initialize_model_parallel(
            tensor_model_parallel_size=config.tensor_parallel_size,
            pipeline_model_parallel_size=config.pipeline_parallel_size,
            expert_model_parallel_size=config.expert_parallel_size,
            expert_tensor_parallel_size=config.expert_tensor_parallel_size,
            context_parallel_size=config.context_parallel_size,
        )
    model_parallel_cuda_manual_seed(config.seed)


class MegatronBackend:
    """`TrainBackend` on megatron-core (needs CUDA; `trainer.type: torch` is the CPU backend)."""

    def __init__(self, config: MegatronBackendConfig) -> None:
        from roll.models import resolve_model_path

        require_cuda()
        _init_process_group()
        # Checked before megatron-core builds its groups, whose own errors do not name our config keys.
        hf = json.loads((resolve_model_path(config.model) / "config.json").read_text())
        check_against_model(config, hf, dist.get_world_size())
        initialize_parallel(config)
        self._setup_model(config, torch.device("cuda", torch.cuda.current_device()))
        self._setup_optimizer()

    def _setup_model(self, config: MegatronBackendConfig, device: torch.device) -> None:
        """Build the model on `device`, load its checkpoint shard and wrap it for data parallel gradients
        (parallel groups initialised). Forward, gradients and weight gathering need nothing more; the
        optimizer (CUDA only in megatron-core) comes from `_setup_optimizer`."""
        from megatron.core import parallel_state as ps
        from megatron.core.distributed import (
            DistributedDataParallel,
            DistributedDataParallelConfig,
            finalize_model_grads,
        )

        from roll.models import resolve_model_path
        from roll.trainer.megatron.model import build_gpt_model

        self.config = config
        self.device = device
        self.folder = resolve_model_path(config.model)
        hf = json.loads((self.folder / "config.json").read_text())
        self.shape = ModelShape.from_hf(hf)
        torch.manual_seed(config.seed)
        model = build_gpt_model(hf, config).to(device)
        load_hf_weights(model, self.folder, self.shape)
        ddp_config = DistributedDataParallelConfig(
            grad_reduce_in_fp32=True, use_distributed_optimizer=config.distributed_optimizer
        )
        self.model = DistributedDataParallel(config=model.config, ddp_config=ddp_config, module=model)
        model.config.no_sync_func = self.model.no_sync
        model.config.finalize_model_grads_func = finalize_model_grads
        self.step = 0
        self.version = 0
        self._weight_group: dist.ProcessGroup | None = None  # rank 0, once engines joined (distributed sync)
        self._dp_rank = ps.get_data_parallel_rank()
        self._dp_size = ps.get_data_parallel_world_size()
        self._cp_rank = ps.get_context_parallel_rank()
        # One rank per data parallel replica reports results: last pipeline stage, tensor and context rank 0.
        self._reports = (
            ps.is_pipeline_last_stage() and ps.get_tensor_model_parallel_rank() == 0 and self._cp_rank == 0
        )

    def _setup_optimizer(self) -> None:
        from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer

        config, opt = self.config, self.config.optimizer
        self.optimizer = get_megatron_optimizer(
            OptimizerConfig(
                optimizer="adam",
                lr=opt.lr,
                weight_decay=opt.weight_decay,
                adam_beta1=opt.betas[0],
                adam_beta2=opt.betas[1],
                adam_eps=opt.eps,
                clip_grad=opt.grad_clip,
                bf16=config.dtype == "bfloat16",
                params_dtype=self.model.config.params_dtype,
                use_distributed_optimizer=config.distributed_optimizer,
            ),
            [self.model],
        )

    def _my_micro_batches(self, batch: PackedBatch) -> tuple[list[tuple[PackedBatch, bool]], int]:
        return deal_micro_batches(
            batch,
            self.config.micro_batch_tokens,
            self._dp_rank,
            self._dp_size,
            self.config.tensor_parallel_size,
            self.config.context_parallel_size,
        )

    def _schedule(
        self, micro_batches: list[tuple[PackedBatch, bool]], length: int, forward_only: bool, on_logits: Any
    ) -> None:
        """Run megatron-core's pipeline schedule; `on_logits(micro, real, shard, logits)` is its loss
        function (`shard`: this rank's share under context parallelism, else None)."""
        from megatron.core.pipeline_parallel import get_forward_backward_func

        def forward_step(data_iterator: Iterator[tuple[PackedBatch, bool]], model: torch.nn.Module):
            micro, real = next(data_iterator)
            inputs = packed_inputs(
                micro, length, self.device, self.config.context_parallel_size, self._cp_rank
            )
            output = model(
                inputs.input_ids, inputs.position_ids, None, packed_seq_params=inputs.packed_seq_params
            )
            return output, partial(on_logits, micro, real, inputs.shard)

        get_forward_backward_func()(
            forward_step_func=forward_step,
            data_iterator=iter(micro_batches),
            model=[self.model],
            num_microbatches=len(micro_batches),
            seq_length=length,
            micro_batch_size=1,
            forward_only=forward_only,
        )

    @torch.no_grad()
    def logprobs(self, batch: PackedBatch) -> torch.Tensor:
        """Per-token logprobs [T] under the current weights (0 off the loss mask), on every rank."""
        self.model.eval()
        micro_batches, length = self._my_micro_batches(batch)
        results: list[torch.Tensor] = []

        def on_logits(micro: PackedBatch, real: bool, shard: ContextShard | None, logits: torch.Tensor):
            if real:
                values, _ = token_logprobs(logits, micro, self.shape.vocab_size, False, shard)
                results.append(values.cpu())
            return logits.new_zeros(()), {}

        self._schedule(micro_batches, length, True, on_logits)
        return self._assemble(batch, results)

    def _assemble(self, batch: PackedBatch, results: list[torch.Tensor]) -> torch.Tensor:
        """The whole batch's values on every rank, from the replicas' reporting ranks."""
        reported = gather_objects((self._reports, self._dp_rank, results))
        replicas = {dp_rank: values for reports, dp_rank, values in reported if reports}
        return assemble_token_values(batch, self.config.micro_batch_tokens, self._dp_size, replicas)

    def train_step(self, batch: PackedBatch, loss: Loss) -> dict[str, float]:
        """One optimizer step on the whole batch (pi_old = `batch.old_logprobs` or the current logprobs)."""
        lr = self.config.optimizer.lr * lr_factor(self.config.schedule, self.step)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.zero_grad()
        reported = self._accumulate_gradients(batch, loss)
        _, grad_norm, _ = self.optimizer.step()
        self.step += 1
        self.version += 1
        return {
            "loss": sum(value for value, _ in reported),
            "grad_norm": float(grad_norm) if grad_norm is not None else float("nan"),
            "lr": lr,
            "step": self.step,
            "tokens": batch.num_tokens,
            "loss_tokens": batch.num_loss_tokens,
            **summarize([metrics for _, metrics in reported]),
        }

    def _accumulate_gradients(
        self, batch: PackedBatch, loss: Loss
    ) -> list[tuple[float, dict[str, torch.Tensor]]]:
        """Zero the gradient buffers, then fill them with the whole batch's loss gradient (reduced over data
        parallel ranks). Returns every micro-batch's (loss, metrics), gathered on every rank."""
        self.model.train()
        self.model.zero_grad_buffer()
        prepared = loss.prepare(batch)
        micro_batches, length = self._my_micro_batches(prepared)
        scale = len(micro_batches) * self._dp_size
        outputs: list[LossOutput] = []

        def on_logits(micro: PackedBatch, real: bool, shard: ContextShard | None, logits: torch.Tensor):
            if not real:  # an idle pass: no gradient, same collectives
                return logits.sum() * 0.0, {}
            logprobs, entropy = token_logprobs(
                logits, micro, self.shape.vocab_size, self.config.compute_entropy, shard
            )
            micro = _on_device(micro, logprobs.device)
            old = micro.old_logprobs if micro.old_logprobs is not None else logprobs.detach()
            out = loss(micro, logprobs, old, entropy)
            outputs.append(out)
            return out.loss * scale, {}

        self._schedule(micro_batches, length, False, on_logits)
        mine = [
            (float(o.loss.detach()), {k: v.detach().cpu() for k, v in o.metrics.items()}) for o in outputs
        ]
        return [
            entry
            for reports, entries in gather_objects((self._reports, mine))
            if reports
            for entry in entries
        ]

    def weight_buckets(
        self, bucket_bytes: int = DEFAULT_BUCKET_BYTES
    ) -> Iterator[list[tuple[str, torch.Tensor]]]:
        """The whole weights in HF checkpoint names (what SGLang loads), gathered bucket by bucket on every
        rank; every rank must consume the generator. Tag them with `self.version`."""
        return gather_hf_buckets(self.model, self.shape, bucket_bytes)

    def weight_specs(self) -> list[TensorSpec]:
        """What `broadcast_weights` sends, in order (names, dtypes, shapes): the engines' receive list."""
        return weight_specs(self.folder, self.shape, self.model.config.params_dtype)

    def join_weight_group(
        self, master_address: str, master_port: int, world_size: int, backend: str = "nccl"
    ) -> None:
        """Rank 0 forms the weights group with the engines as its rank 0 (its store at master_address:
        master_port, on rank 0's node); other ranks do nothing. Call it on every rank while each engine
        joins (`SGLangEngine.join_weight_group`, ranks 1 ..): it returns once all `world_size` joined."""
        if dist.get_rank() == 0:
            group = init_weight_group(master_address, master_port, 0, world_size, backend=backend)
            self._weight_group = group

    def broadcast_weights(self, bucket_bytes: int = DEFAULT_BUCKET_BYTES) -> int:
        """Gather the weights bucket by bucket (every rank) and broadcast them from rank 0 over the weights
        group, while the engines receive `weight_specs()` (`update_weights_from_group`). Returns the
        version sent, which the engines are given as theirs."""
        if dist.get_rank() == 0 and self._weight_group is None:
            raise RuntimeError("no weights group: call join_weight_group on every rank and engine first")
        broadcast_buckets(self.weight_buckets(bucket_bytes), self.weight_specs(), self._weight_group)
        return self.version

    def state_dict_for_inference(self) -> InferenceWeights:
        """Whole weights named as a transformers model holds them in memory (the torch engine's names), in
        host memory on rank 0 (empty on the others): every rank gathers bucket by bucket, so a GPU holds one
        bucket more than its shard, never the whole model. Collective: call it on every rank."""
        keep = dist.get_rank() == 0
        state = {name: tensor.cpu() for bucket in self.weight_buckets() if keep for name, tensor in bucket}
        return InferenceWeights(
            state_dict=to_transformers_layout(state, self.shape.num_experts) if keep else {},
            version=self.version,
        )

    def export_hf(self, directory: Path) -> None:
        """Hugging Face folder: safetensors gathered from every shard, config and tokenizer copied."""
        save_hf_folder(self.weight_buckets(), self.folder, Path(directory), write=dist.get_rank() == 0)
        dist.barrier()

    def save(self, directory: Path) -> None:
        """Per-rank files (parameters, optimizer, RNG) plus checkpoint.json; load needs the same layout."""
        save_checkpoint(self, Path(directory))

    def load(self, directory: Path) -> None:
        """Restore a checkpoint written by `save` under the same layout and world size."""
        load_checkpoint(self, Path(directory))


def deal_micro_batches(
    batch: PackedBatch,
    token_budget: int,
    dp_rank: int,
    dp_size: int,
    length_multiple: int,
    context_parallel_size: int = 1,
) -> tuple[list[tuple[PackedBatch, bool]], int]:
    """Data parallel rank `dp_rank`'s micro-batches as (batch, real), dealt round-robin; unreal ones are idle
    passes over the first trajectory so every replica runs as many. Also their common padded row length
    (`context_parallel.row_length` with `length_multiple`, the tensor parallel size, for sequence
    parallelism; the pipeline schedule needs one length for all micro-batches)."""
    if batch.num_trajectories == 0:
        raise ValueError("the batch holds no trajectory; pass at least one")
    plan = plan_micro_batches(batch, token_budget)
    rounds = -(-len(plan) // dp_size)
    mine = [(batch.slice_trajectories(start, end), True) for start, end in plan[dp_rank::dp_size]]
    mine += [(batch.slice_trajectories(0, 1), False)] * (rounds - len(mine))
    length = max(row_length(micro.seq_lens, length_multiple, context_parallel_size) for micro, _ in mine)
    return mine, length


def assemble_token_values(
    batch: PackedBatch, token_budget: int, dp_size: int, replicas: dict[int, list[torch.Tensor]]
) -> torch.Tensor:
    """The whole batch's [T] values from each data parallel replica's per-micro-batch values (in the order
    `deal_micro_batches` dealt them)."""
    plan = plan_micro_batches(batch, token_budget)
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), batch.trajectory_token_counts().cumsum(0)])
    out = torch.zeros(batch.num_tokens)
    for dp_rank, values in replicas.items():
        for (start, end), tensor in zip(plan[dp_rank::dp_size], values, strict=True):
            out[int(offsets[start]) : int(offsets[end])] = tensor
    return out


def _on_device(batch: PackedBatch, device: torch.device) -> PackedBatch:
    """The batch's tensors on `device` (the loss maths runs where the logprobs are)."""
    if device.type == "cpu":
        return batch
    updates = {
        name: value.to(device) for name, value in vars(batch).items() if isinstance(value, torch.Tensor)
    }
    return batch.with_updates(**updates)
