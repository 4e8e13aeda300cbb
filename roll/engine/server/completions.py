"""POST /v1/completions: raw text or token-id prompts continued without a chat template."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse

from roll.engine.server.errors import APIError
from roll.engine.server.generation import (
    completion_logprobs,
    engine_stream,
    generate_or_abort,
    sampling_params,
)
from roll.engine.server.schemas import CompletionRequest
from roll.engine.server.state import ServerState, new_id
from roll.engine.types import GenerateRequest, GenerateResult

ENDPOINT = "completions"


async def create_completion(
    state: ServerState, body: CompletionRequest, http: Request
) -> JSONResponse | StreamingResponse:
    state.check_model(body.model)
    completion_id = new_id("cmpl")
    requests = [
        _request(state, body, f"{completion_id}-{i}", prompt) for i, prompt in enumerate(body.prompts())
    ]
    if body.stream:
        return StreamingResponse(
            _stream(state, body, completion_id, requests),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache"},
        )
    results = await asyncio.gather(*(generate_or_abort(state.engine, r, http) for r in requests))
    return JSONResponse(_response(state, body, completion_id, results))


def _request(
    state: ServerState, body: CompletionRequest, request_id: str, prompt: str | list[int]
) -> GenerateRequest:
    if isinstance(prompt, str):
        token_ids = state.tokenizer(prompt, add_special_tokens=True).input_ids
    else:
        vocab = len(state.tokenizer)
        if any(not 0 <= token < vocab for token in prompt):
            raise APIError(f"prompt token ids must lie in [0, {vocab})", param="prompt", code="invalid_value")
        token_ids = prompt
    if not token_ids:
        raise APIError("the prompt is empty after tokenization; send some text", param="prompt")
    params = sampling_params(
        body,
        prompt_tokens=len(token_ids),
        max_context=state.engine.max_context,
        max_new_tokens=body.max_tokens,
        stop=body.stop_strings(),
        stop_token_ids=[],
        top_logprobs=body.logprobs or 0,
    )
    return GenerateRequest(request_id=request_id, prompt_token_ids=token_ids, params=params)


def _response(
    state: ServerState, body: CompletionRequest, completion_id: str, results: list[GenerateResult]
) -> dict[str, Any]:
    choices = []
    for prompt_index, result in enumerate(results):
        for completion in result.completions:
            choice: dict[str, Any] = {
                "index": prompt_index * body.n + completion.index,
                "text": completion.text,
                "logprobs": completion_logprobs(
                    state.tokenizer, completion.token_ids, completion.logprobs, completion.top_logprobs
                )
                if body.logprobs is not None
                else None,
                "finish_reason": completion.finish_reason,
            }
            if body.return_token_ids:
                choice["prompt_token_ids"] = result.prompt_token_ids
                choice["token_ids"] = completion.token_ids
                choice["token_logprobs"] = completion.logprobs
                choice["weight_version"] = result.weight_version
            choices.append(choice)
        completion_tokens = sum(len(c.token_ids) for c in result.completions)
        state.metrics.observe(
            ENDPOINT, len(result.prompt_token_ids), completion_tokens, result.ttft_s, result.latency_s
        )
    prompt_tokens = sum(len(r.prompt_token_ids) for r in results)
    completion_tokens = sum(len(c.token_ids) for r in results for c in r.completions)
    return {
        "id": completion_id,
        "object": "text_completion",
        "created": int(time.time()),
        "model": state.model_id,
        "choices": choices,
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
        "system_fingerprint": None,
    }


async def _stream(
    state: ServerState, body: CompletionRequest, completion_id: str, requests: list[GenerateRequest]
) -> AsyncIterator[str]:
    created = int(time.time())
    completion_tokens = 0
    offsets: dict[int, int] = {}
    # Prompts stream one after another; each still joins the running batch with other clients' requests.
    try:
        for prompt_index, request in enumerate(requests):
            async for delta in engine_stream(state.engine, request):
                index = prompt_index * body.n + delta.index
                completion_tokens += len(delta.token_ids)
                choice: dict[str, Any] = {
                    "index": index,
                    "text": delta.text,
                    "logprobs": completion_logprobs(
                        state.tokenizer,
                        delta.token_ids,
                        delta.logprobs,
                        delta.top_logprobs,
                        offsets.get(index, 0),
                    )
                    if body.logprobs is not None
                    else None,
                    "finish_reason": delta.finish_reason,
                }
                offsets[index] = offsets.get(index, 0) + len(delta.text)
                if body.return_token_ids:
                    choice["token_ids"] = delta.token_ids
                    choice["token_logprobs"] = delta.logprobs
                    if delta.finish_reason is not None:
                        choice["prompt_token_ids"] = request.prompt_token_ids
                        choice["weight_version"] = delta.weight_version
                payload = {
                    "id": completion_id,
                    "object": "text_completion",
                    "created": created,
                    "model": state.model_id,
                    "choices": [choice],
                }
                yield f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"
    except APIError as error:
        yield f"data: {json.dumps(error.body())}\n\n"
        return
    if body.stream_options and body.stream_options.include_usage:
        prompt_tokens = sum(len(r.prompt_token_ids) for r in requests)
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        payload = {
            "id": completion_id,
            "object": "text_completion",
            "created": created,
            "model": state.model_id,
            "choices": [],
            "usage": usage,
        }
        yield f"data: {json.dumps(payload)}\n\n"
    yield "data: [DONE]\n\n"
