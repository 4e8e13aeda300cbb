"""What chat and text completions share: sampling parameters, context checks, running a request, logprobs."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from roll.engine.protocol import EngineError, InferenceEngine
from roll.engine.server.errors import APIError, validation_error
from roll.engine.server.schemas import SamplingFields
from roll.engine.types import GenerateRequest, GenerateResult, SamplingParams, StreamDelta

if TYPE_CHECKING:
    from fastapi import Request
    from transformers import PreTrainedTokenizerBase

DISCONNECT_POLL_S = 0.25


def sampling_params(
    body: SamplingFields,
    *,
    prompt_tokens: int,
    max_context: int,
    max_new_tokens: int | None,
    stop: list[str],
    stop_token_ids: list[int],
    top_logprobs: int,
) -> SamplingParams:
    """Engine parameters for `body`; a prompt or output limit past the context is a 400 like OpenAI's."""
    room = max_context - prompt_tokens
    if room <= 0 or (max_new_tokens is not None and max_new_tokens > room):
        requested = prompt_tokens + (max_new_tokens or 1)
        raise APIError(
            f"This model's maximum context length is {max_context} tokens. However, you requested "
            f"{requested} tokens ({prompt_tokens} in the prompt, {max_new_tokens or 1} for the completion). "
            "Please reduce the length of the messages or the completion.",
            param="messages",
            code="context_length_exceeded",
        )
    try:
        return SamplingParams(
            max_new_tokens=max_new_tokens or room,
            temperature=1.0 if body.temperature is None else body.temperature,
            top_p=1.0 if body.top_p is None else body.top_p,
            top_k=body.top_k or 0,
            stop=stop,
            stop_token_ids=stop_token_ids,
            seed=body.seed,
            n=body.n,
            top_logprobs=top_logprobs,
        )
    except ValidationError as error:
        raise validation_error(error.errors()) from error


async def generate_or_abort(
    engine: InferenceEngine, request: GenerateRequest, http: Request | None
) -> GenerateResult:
    """Run `request` to the end, aborting it in the engine if the client hangs up first (`http`: the HTTP
    request it came with; None for a caller in this process) or the caller is cancelled."""
    generation = asyncio.create_task(engine_call(engine.generate(request)))
    waits: set[asyncio.Task[Any]] = {generation}
    if http is not None:
        waits.add(asyncio.create_task(_wait_for_disconnect(http)))
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        await _abort(engine, request, generation)
        raise
    finally:
        for watcher in waits - {generation}:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
    if not generation.done():
        await _abort(engine, request, generation)
        raise APIError("the client closed the connection", status=499, code="client_closed_request")
    return generation.result()


async def _abort(engine: InferenceEngine, request: GenerateRequest, generation: asyncio.Task[Any]) -> None:
    """Stop `request` in the engine (nobody waits for it) and its task here."""
    await engine.abort(request.request_id)
    generation.cancel()
    with contextlib.suppress(asyncio.CancelledError, APIError):
        await generation


async def engine_call(awaitable: Any) -> Any:
    """Await an engine call, turning its errors into server errors with the engine's message."""
    try:
        return await awaitable
    except EngineError as error:
        raise _engine_error(error) from error


async def engine_stream(engine: InferenceEngine, request: GenerateRequest) -> AsyncIterator[StreamDelta]:
    """The engine's deltas for `request`; closing this iterator early aborts the request in the engine."""
    async with contextlib.aclosing(engine.stream(request)) as deltas:
        try:
            async for delta in deltas:
                yield delta
        except EngineError as error:
            raise _engine_error(error) from error


def _engine_error(error: EngineError) -> APIError:
    return APIError(str(error), status=503, type="server_error", code="engine_error")


async def _wait_for_disconnect(http: Request) -> None:
    while not await http.is_disconnected():
        await asyncio.sleep(DISCONNECT_POLL_S)


def token_text(tokenizer: PreTrainedTokenizerBase, token_id: int) -> str:
    return tokenizer.decode([token_id])


def chat_logprobs(
    tokenizer: PreTrainedTokenizerBase,
    token_ids: list[int],
    logprobs: list[float],
    top_logprobs: list[list[tuple[int, float]]] | None,
) -> list[dict[str, Any]]:
    """The OpenAI chat `logprobs.content` list for these tokens."""
    entries = []
    for position, (token_id, logprob) in enumerate(zip(token_ids, logprobs, strict=True)):
        text = token_text(tokenizer, token_id)
        alternatives = top_logprobs[position] if top_logprobs else []
        entries.append(
            {
                "token": text,
                "logprob": logprob,
                "bytes": list(text.encode()),
                "top_logprobs": [
                    {"token": alt, "logprob": alt_logprob, "bytes": list(alt.encode())}
                    for alt, alt_logprob in ((token_text(tokenizer, i), lp) for i, lp in alternatives)
                ],
            }
        )
    return entries


def completion_logprobs(
    tokenizer: PreTrainedTokenizerBase,
    token_ids: list[int],
    logprobs: list[float],
    top_logprobs: list[list[tuple[int, float]]] | None,
    offset: int = 0,
) -> dict[str, Any]:
    """The legacy completions `logprobs` object (tokens, token_logprobs, top_logprobs, text_offset)."""
    tokens = [token_text(tokenizer, token_id) for token_id in token_ids]
    offsets = []
    for token in tokens:
        offsets.append(offset)
        offset += len(token)
    return {
        "tokens": tokens,
        "token_logprobs": logprobs,
        "top_logprobs": [
            {token_text(tokenizer, i): lp for i, lp in alternatives} for alternatives in (top_logprobs or [])
        ]
        or None,
        "text_offset": offsets,
    }
