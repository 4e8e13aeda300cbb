"""Settings of the SGLang engine (extra `gpu`); importable without sglang or torch.

Every field is passed to `sglang.Engine(**server_args)` (SGLang's `ServerArgs`,
python/sglang/srt/server_args.py) or chooses how our adapter drives the engine; nothing here is unused.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from roll.config import StrictConfig


class SGLangEngineConfig(StrictConfig):
    """One SGLang offline engine (`sglang.Engine`) on `tp_size` GPUs, serving the policy for rollout."""

    type: Literal["sglang"] = Field("sglang", description="Engine kind: sglang.")
    model_path: str | None = Field(
        None,
        description="Hugging Face folder the engine loads; None: the policy's own model (trainer.model, "
        "builtin ids resolved to their folder).",
    )
    tp_size: int = Field(1, ge=1, description="Tensor-parallel GPUs of one engine (ServerArgs.tp_size).")
    ep_size: int = Field(
        1, ge=1, description="Expert-parallel size for MoE models, dividing tp_size (ServerArgs.ep_size)."
    )
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = Field(
        "bfloat16", description="Weights and activations (ServerArgs.dtype)."
    )
    mem_fraction_static: float = Field(
        0.8,
        gt=0.0,
        lt=1.0,
        description="Share of GPU memory for weights plus KV cache pool (ServerArgs.mem_fraction_static); "
        "lower it when the trainer shares the GPU.",
    )
    max_running_requests: int | None = Field(
        None,
        ge=1,
        description="Most requests decoded together (ServerArgs.max_running_requests); None: SGLang's.",
    )
    context_length: int | None = Field(
        None, ge=16, description="Longest prompt + completion (ServerArgs.context_length); None: the model's."
    )
    chunked_prefill_size: int | None = Field(
        None,
        ge=1,
        description="Prompt tokens prefilled per scheduler step (ServerArgs.chunked_prefill_size); "
        "None: SGLang's.",
    )
    disable_radix_cache: bool = Field(
        False, description="Turn off prefix reuse (ServerArgs.disable_radix_cache); episodes share prefixes."
    )
    enable_memory_saver: bool = Field(
        True,
        description="Allow sleep/wake (release/resume_memory_occupation) for train-rollout multiplexing "
        "(ServerArgs.enable_memory_saver, needs the torch_memory_saver package).",
    )
    enable_weights_cpu_backup: bool = Field(
        True,
        description="Keep a host copy of the weights while asleep, so wake needs no weight update "
        "(ServerArgs.enable_weights_cpu_backup); False frees host memory but sleep then loses the weights "
        "until the next update.",
    )
    weight_update: Literal["tensor", "distributed"] = Field(
        "tensor",
        description="How trained weights arrive: tensor (the trainer's tensors handed over in-process or "
        "over CUDA IPC; a colocated engine) or distributed (NCCL broadcast from trainer rank 0 into a "
        "weights update group; separate GPUs or nodes). A folder path is always accepted "
        "(update_weights_from_disk).",
    )
    weight_update_bucket_bytes: int = Field(
        512 * 2**20,
        ge=2**20,
        description="Bytes of tensors sent per update call (bounds the extra GPU memory of a sync).",
    )
    random_seed: int = Field(0, description="Seed of requests that bring none (ServerArgs.random_seed).")
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        "error", description="SGLang's own log level (ServerArgs.log_level)."
    )

    def server_args(self, model_path: str, base_gpu_id: int = 0) -> dict[str, object]:
        """The keyword arguments of `sglang.Engine(...)` for this config, the resolved model folder and the
        first of the tp_size GPUs (ServerArgs.base_gpu_id; engines sharing a node take consecutive ranges)."""
        args: dict[str, object] = {
            "model_path": model_path,
            "base_gpu_id": base_gpu_id,
            "tp_size": self.tp_size,
            "ep_size": self.ep_size,
            "dtype": self.dtype,
            "mem_fraction_static": self.mem_fraction_static,
            "disable_radix_cache": self.disable_radix_cache,
            "enable_memory_saver": self.enable_memory_saver,
            "enable_weights_cpu_backup": self.enable_weights_cpu_backup,
            "random_seed": self.random_seed,
            "log_level": self.log_level,
        }
        optional = {
            "max_running_requests": self.max_running_requests,
            "context_length": self.context_length,
            "chunked_prefill_size": self.chunked_prefill_size,
        }
        args.update({key: value for key, value in optional.items() if value is not None})
        return args
