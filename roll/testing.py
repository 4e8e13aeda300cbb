"""Test doubles for a model's choices, for the tests and benchmarks of roll's rollout, proxy and pipeline.

`ScriptedEngine` is an `InferenceEngine` whose "generations" are scripted texts.

Served by the real `roll serve` app (`roll.engine.server.create_app`) with a real tokenizer, it goes through
the real chat templating, tool-call parsing and `return_token_ids` path; only what the model says is scripted.
Each scripted text is tokenized and ends with the chat template's end-of-turn token, with logprob 0 (the
script is certain).

The script is either a list of replies answered in request order, or a `policy`: a function from the
decoded prompt to the reply (for concurrent episodes, whose requests arrive in no fixed order). Two knobs
make request handling observable: `gather_next(n)` holds the next n requests until all n have arrived (or
`GATHER_TIMEOUT_S` passed), so they are in flight together only if their clients sent them concurrently
(`max_in_flight` tells), and `hold = True` keeps every request open until the server aborts it.

The GEM env manager's doubles are called as `policy(prompt_ids, params)`: `ScriptedBinarySearch` plays
GuessTheNumber from the hints in the chat, `ScriptedConstant` always says the same; `scripted_result` is
what the engine returns for one scripted reply.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from roll.engine.protocol import EngineError
from roll.engine.types import (
    Completion,
    EngineStats,
    GenerateRequest,
    GenerateResult,
    SamplingParams,
    StreamDelta,
)
from roll.models.chat import chat_stop_token_ids

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedTokenizerBase

GATHER_TIMEOUT_S = 120.0
GATHER_POLL_S = 0.05


class ScriptedEngine:
    """Answers request i with `replies[i]` (or `policy(prompt text)`); an exhausted script is an
    `EngineError` naming the request. Like the engine, a reply ends at the request's first stop string: its
    text just before it, its token ids with it (and no end of turn)."""

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        replies: Iterable[str] = (),
        max_context: int = 8192,
        policy: Callable[[str], str] | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.replies = list(replies)
        self.policy = policy
        self.weight_version = 0
        self.max_context = max_context
        self.prompts: list[list[int]] = []
        self._gather = 0
        self._gathered = 0
        self.hold = False
        self.in_flight = 0
        self.max_in_flight = 0
        self.aborted: list[str] = []
        self._released: dict[str, asyncio.Event] = {}
        self._lock = threading.Lock()
        self.end_of_turn = chat_stop_token_ids(tokenizer)[:1]

    def gather_next(self, count: int) -> None:
        """Hold the next `count` requests until all of them have arrived."""
        with self._lock:
            self._gather, self._gathered = count, 0

    def push(self, *replies: str) -> None:
        with self._lock:
            self.replies.extend(replies)

    async def start(self) -> None:
        return None

    async def shutdown(self) -> None:
        return None

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await self._wait_turn(request.request_id)
            text = self._reply(request)
        finally:
            with self._lock:
                self.in_flight -= 1
        hits = sorted((text.find(stop), stop) for stop in request.params.stop if stop and stop in text)
        if hits:
            cut, stop = hits[0]
            token_ids = self.tokenizer.encode(text[: cut + len(stop)], add_special_tokens=False)
            text = text[:cut]
        else:
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

    async def _wait_turn(self, request_id: str) -> None:
        if self.hold:
            released = self._released.setdefault(request_id, asyncio.Event())
            await released.wait()
            raise EngineError(f"request {request_id} was aborted")
        with self._lock:
            joins = self._gathered < self._gather
            self._gathered += int(joins)
        deadline = time.monotonic() + GATHER_TIMEOUT_S
        while joins and self._gathered < self._gather and time.monotonic() < deadline:
            await asyncio.sleep(GATHER_POLL_S)

    def _reply(self, request: GenerateRequest) -> str:
        with self._lock:
            index = len(self.prompts)
            self.prompts.append(list(request.prompt_token_ids))
            if self.policy is not None:
                return self.policy(self.tokenizer.decode(request.prompt_token_ids))
            if index >= len(self.replies):
                raise EngineError(f"the scripted engine has no reply left for request {index + 1}")
            return self.replies[index]

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
        self.aborted.append(request_id)
        released = self._released.get(request_id)
        if released is not None:
            released.set()

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
            kv_cache_bytes=0,
        )


def scripted_result(
    tokenizer: PreTrainedTokenizerBase,
    text: str,
    end_of_turn: int,
    prompt_ids: list[int],
    *,
    logprob: float = -0.5,
    weight_version: int = 0,
    request_id: str = "scripted",
) -> GenerateResult:
    """What the engine returns for a scripted reply: its tokens, ending the turn, with made-up logprobs."""
    ids = [*tokenizer(text, add_special_tokens=False).input_ids, end_of_turn]
    completion = Completion(
        index=0, token_ids=ids, logprobs=[logprob] * len(ids), text=text, finish_reason="stop"
    )
    return GenerateResult(
        request_id=request_id,
        prompt_token_ids=prompt_ids,
        completions=[completion],
        weight_version=weight_version,
        ttft_s=0.0,
        latency_s=0.0,
    )


class ScriptedBinarySearch:
    """Test double of an LLM: answers GuessTheNumber by binary search from the hints in the chat."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, broken_turns: set[int] | None = None) -> None:
        self.tokenizer = tokenizer
        self.broken_turns = broken_turns or set()
        self.calls = 0

    async def __call__(self, prompt_ids: list[int], params: SamplingParams) -> GenerateResult:
        text = self.tokenizer.decode(prompt_ids)
        low, high = 1, 10
        for guess, hint in re.findall(r"you guessed (\d+), and the target number is (\w+)", text):
            if hint == "higher":
                low = max(low, int(guess) + 1)
            else:
                high = min(high, int(guess) - 1)
        answer = (
            "I am not sure."
            if self.calls in self.broken_turns
            else f"My guess is \\boxed{{{(low + high) // 2}}}."
        )
        self.calls += 1
        return scripted_result(
            self.tokenizer,
            answer,
            params.stop_token_ids[0],
            prompt_ids,
            weight_version=7,
            request_id=str(self.calls),
        )


class ScriptedConstant:
    """Test double of an LLM that always answers the same text."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, answer: str) -> None:
        self.tokenizer = tokenizer
        self.answer = answer

    async def __call__(self, prompt_ids: list[int], params: SamplingParams) -> GenerateResult:
        return scripted_result(self.tokenizer, self.answer, params.stop_token_ids[0], prompt_ids)
