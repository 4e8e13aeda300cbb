"""The state of one completion inside the engine, and of a prompt waiting to be prefilled."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from transformers import DynamicCache

from roll.engine.torch_engine.detokenize import IncrementalDetokenizer
from roll.engine.types import FinishReason, SamplingParams


@dataclass
class Sequence:
    """One completion. Everything before `pending_token` is in the KV cache once it runs; the next decode step
    feeds `pending_token` and samples the token after it."""

    request_id: str
    index: int
    params: SamplingParams
    prompt_ids: list[int]
    generator: torch.Generator
    detokenizer: IncrementalDetokenizer
    stop_ids: frozenset[int]
    output_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    top_logprobs: list[list[tuple[int, float]]] = field(default_factory=list)
    finish_reason: FinishReason | None = None

    @property
    def pending_token(self) -> int:
        return self.output_ids[-1] if self.output_ids else self.prompt_ids[-1]

    def context_ids(self) -> list[int]:
        """The tokens whose KV must be cached before the next decode step."""
        return [*self.prompt_ids, *self.output_ids][:-1]


@dataclass
class PrefillJob:
    """Tokens to put into the KV cache, chunk by chunk, before `sequences` join the running batch (the n
    completions of one prompt share one prefill)."""

    sequences: list[Sequence]
    tokens: list[int]
    done: int = 0
    cache: DynamicCache | None = None
    reused: int = 0

    @property
    def remaining(self) -> int:
        return len(self.tokens) - self.done
