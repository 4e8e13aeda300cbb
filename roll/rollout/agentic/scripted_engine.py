"""Test double for a model's choices: an `InferenceEngine` whose "generations" are scripted texts.

Served by the real `roll serve` app (`roll.engine.server.create_app`) with a real tokenizer, it goes through
the real chat templating, tool-call parsing and `return_token_ids` path; only what the model says is scripted.
Each scripted text is tokenized and ends with the chat template's end-of-turn token, with logprob 0 (the
script is certain).
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from roll.engine.protocol import EngineError
from roll.engine.types import Completion, EngineStats, GenerateRequest, GenerateResult, StreamDelta
from roll.models.chat import chat_stop_token_ids

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedTokenizerBase


class ScriptedEngine:
    """Answers request i with `replies[i]`; an exhausted script is an `EngineError` naming the request."""

    def __init__(
        self, tokenizer: PreTrainedTokenizerBase, replies: Iterable[str] = (), max_context: int = 8192
    ) -> None:
        self.tokenizer = tokenizer
        self.replies = list(replies)
        self.weight_version = 0
        self.max_context = max_context
        self.prompts: list[list[int]] = []
        self._lock = threading.Lock()
        self.end_of_turn = chat_stop_token_ids(tokenizer)[:1]

    def push(self, *replies: str) -> None:
        with self._lock:
            self.replies.extend(replies)

    async def start(self) -> None:
        return None

    async def shutdown(self) -> None:
        return None

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        with self._lock:
            index = len(self.prompts)
            if index >= len(self.replies):
                raise EngineError(f"the scripted engine has no reply left for request {index + 1}")
            self.prompts.append(list(request.prompt_token_ids))
            text = self.replies[index]
        token_ids = self.tokenizer.encode(text, add_special_tokens=False) + self.end_of_turn
        completion = Completion(
            index=0, token_ids=token_ids, logprobs=[0.0] * len(token_ids), text=text, finish_reason="stop"
        )
        return GenerateResult(
            request_id=request.request_id,
            prompt_token_ids=list(request.prompt_token_ids),
            completions=[completion],
            weight_version=self.weight_version,
            ttft_s=0.0,
            latency_s=0.0,
        )

    async def stream(self, request: GenerateRequest) -> AsyncIterator[StreamDelta]:
        result = await self.generate(request)
        completion = result.completions[0]
        yield StreamDelta(
            index=0,
            token_ids=completion.token_ids,
            logprobs=completion.logprobs,
            text=completion.text,
            finish_reason="stop",
            weight_version=self.weight_version,
        )

    async def abort(self, request_id: str) -> None:
        return None

    async def update_weights(self, weights: Mapping[str, torch.Tensor] | Path, version: int) -> None:
        self.weight_version = version

    async def sleep(self) -> None:
        return None

    async def wake(self) -> None:
        return None

    def stats(self) -> EngineStats:
        return EngineStats(
            running=0,
            waiting=0,
            weight_version=self.weight_version,
            sleeping=False,
            requests_finished=len(self.prompts),
            prompt_tokens=sum(len(p) for p in self.prompts),
            prefix_cache_hit_tokens=0,
            generated_tokens=0,
            decode_steps=0,
        )
