"""Settings of the embedded torch engine."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class TorchEngineConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["torch"] = Field("torch", description="Engine kind: torch (the embedded engine).")
    max_batch_size: int = Field(64, ge=1, description="Most completions decoded together in one step.")
    prefill_chunk_tokens: int = Field(
        256,
        ge=1,
        description="Prompt tokens prefilled between two decode steps; bounds how long a long "
        "prompt can stall the running decodes.",
    )
    prefix_cache_tokens: int = Field(
        32768,
        ge=0,
        description="Tokens of prompt-prefix KV kept for reuse (0 turns prefix reuse off). The default keeps "
        "the last turn of about a dozen agent conversations of 2-3k tokens (SmolLM2-135M in float32: "
        "~46 KiB per token, ~1.5 GiB in all).",
    )
    prefix_min_match: int = Field(32, ge=1, description="Shortest shared prefix worth reusing, in tokens.")
    seed: int = Field(0, description="Seeds the per-request generators of requests that bring no seed.")
    matmul_dtype: Literal["float32", "bfloat16"] = Field(
        "float32",
        description="Dtype of the linear layers' matmuls in the engine's passes on CPU (weights packed "
        "in it, activations cast in and out; norms, attention and the KV cache keep the model's dtype). "
        "bfloat16 computes the linears as a trainer under bf16 autocast does, and decodes about 2x faster "
        "on a CPU with AMX or avx512_bf16.",
    )
    num_threads: int | None = Field(None, ge=1, description="torch intra-op threads; None keeps torch's.")
