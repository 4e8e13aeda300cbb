"""Wire types of the inference engines: requests, results, stream deltas and statistics.

Shared by every engine (torch, sglang) and the OpenAI-compatible server; they cross processes as JSON.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

FinishReason = Literal["stop", "length", "abort"]
TopLogprobs = list[list[tuple[int, float]]]


class SamplingParams(BaseModel):
    """How to sample one request's completions."""

    model_config = ConfigDict(extra="forbid")

    max_new_tokens: int = Field(256, ge=1, description="Most tokens to generate per completion.")
    temperature: float = Field(1.0, ge=0.0, description="0 means greedy (argmax).")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="Nucleus sampling mass; 1 is off.")
    top_k: int = Field(0, ge=0, description="Keep only the k most likely tokens; 0 is off.")
    stop: list[str] = Field(default_factory=list, description="Stop strings; the text ends before them.")
    stop_token_ids: list[int] = Field(
        default_factory=list, description="Token ids that end a completion, besides the tokenizer's eos."
    )
    seed: int | None = Field(None, description="Seed of this request's generator; same seed, same output.")
    n: int = Field(1, ge=1, le=64, description="Number of completions of the same prompt.")
    top_logprobs: int = Field(0, ge=0, le=20, description="Alternatives returned per position (0..20).")
    ignore_eos: bool = Field(False, description="Keep generating past eos (benchmarks, exact-length tests).")


class GenerateRequest(BaseModel):
    """A prompt, already tokenized, and how to continue it."""

    model_config = ConfigDict(extra="forbid")

    request_id: str
    prompt_token_ids: list[int] = Field(min_length=1)
    params: SamplingParams = Field(default_factory=SamplingParams)


class Completion(BaseModel):
    """One of the n continuations of a prompt."""

    index: int
    token_ids: list[int]
    logprobs: list[float] = Field(
        description="Log-probability of each sampled token under the raw model distribution (temperature 1, "
        "before top-k/top-p), computed by the weights that produced it."
    )
    top_logprobs: TopLogprobs | None = None
    text: str
    finish_reason: FinishReason


class GenerateResult(BaseModel):
    """Everything a finished request produced."""

    request_id: str
    prompt_token_ids: list[int]
    completions: list[Completion]
    weight_version: int = Field(description="Version of the weights that produced the last token.")
    ttft_s: float = Field(description="Seconds from submission to the first generated token.")
    latency_s: float = Field(description="Seconds from submission to the end of the last completion.")


class StreamDelta(BaseModel):
    """New tokens of one completion after one decode step; the last delta carries the finish reason."""

    index: int
    token_ids: list[int]
    logprobs: list[float]
    top_logprobs: TopLogprobs | None = None
    text: str
    finish_reason: FinishReason | None = None
    weight_version: int = 0


class EngineStats(BaseModel):
    """A snapshot of an engine's load and counters."""

    running: int = Field(description="Completions in the running batch.")
    waiting: int = Field(description="Completions queued or still prefilling.")
    weight_version: int
    sleeping: bool
    requests_finished: int
    prompt_tokens: int = Field(description="Prompt tokens prefilled (after prefix reuse).")
    prefix_cache_hit_tokens: int = Field(description="Prompt tokens served from the shared prefix cache.")
    generated_tokens: int
    decode_steps: int
    kv_cache_bytes: int = Field(description="Bytes held by the KV cache of the running batch now.")
    shared_prefix_tokens: int = Field(
        0, description="Prompt tokens every running completion shares, held once in the KV cache now."
    )
