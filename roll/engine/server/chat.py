"""POST /v1/chat/completions: messages and tools in, assistant messages (content or tool calls) out."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse

from roll.engine.server.errors import APIError
from roll.engine.server.generation import chat_logprobs, engine_stream, generate_or_abort, sampling_params
from roll.engine.server.schemas import ChatCompletionRequest
from roll.engine.server.state import ServerState, new_id
from roll.engine.server.tool_stream import ContentStream
from roll.engine.types import GenerateRequest, StreamDelta
from roll.models.chat import ChatPrompt, ChatTemplateError, chat_stop_token_ids, render_chat

ENDPOINT = "chat.completions"


async def create_chat_completion(
    state: ServerState, body: ChatCompletionRequest, http: Request
) -> JSONResponse | StreamingResponse:
    prompt, request = _prepare(state, body)
    if body.stream:
        return StreamingResponse(
            _stream(state, body, prompt, request),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache"},
        )
    return JSONResponse(await _complete(state, body, prompt, request, http))


async def complete_chat(state: ServerState, body: ChatCompletionRequest) -> dict[str, Any]:
    """What `POST /v1/chat/completions` answers to a non-streaming `body`, for a caller in this process:
    errors are `APIError`s, and cancelling the call aborts the generation in the engine."""
    if body.stream:
        raise APIError("a call in this process is answered whole; send it without stream", param="stream")
    prompt, request = _prepare(state, body)
    return await _complete(state, body, prompt, request, None)


def _prepare(state: ServerState, body: ChatCompletionRequest) -> tuple[ChatPrompt, GenerateRequest]:
    state.check_model(body.model)
    prompt = _render(state, body)
    params = sampling_params(
        body,
        prompt_tokens=len(prompt.token_ids),
        max_context=state.engine.max_context,
        max_new_tokens=body.output_limit(),
        stop=[*body.stop_strings(), *prompt.stop],
        stop_token_ids=chat_stop_token_ids(state.tokenizer),
        top_logprobs=(body.top_logprobs or 0) if body.logprobs else 0,
    )
    request = GenerateRequest(request_id=new_id("chatcmpl"), prompt_token_ids=prompt.token_ids, params=params)
    return prompt, request


def _render(state: ServerState, body: ChatCompletionRequest) -> ChatPrompt:
    tool_choice = body.tool_choice or ("auto" if body.tools else "none")
    try:
        return render_chat(state.tokenizer, body.messages, body.tools, tool_choice)
    except ChatTemplateError as error:
        raise APIError(str(error), param=error.param, code="invalid_value") from error


async def _complete(
    state: ServerState,
    body: ChatCompletionRequest,
    prompt: ChatPrompt,
    request: GenerateRequest,
    http: Request | None,
) -> dict[str, Any]:
    result = await generate_or_abort(state.engine, request, http)
    choices = []
    for completion in result.completions:
        output = prompt.parse_output(completion.text, completion.token_ids)
        choice: dict[str, Any] = {
            "index": completion.index,
            "message": output.to_openai_message(),
            "logprobs": {
                "content": chat_logprobs(
                    state.tokenizer, completion.token_ids, completion.logprobs, completion.top_logprobs
                )
            }
            if body.logprobs
            else None,
            "finish_reason": "tool_calls" if output.tool_calls else completion.finish_reason,
        }
        if body.return_token_ids:
            choice["token_ids"] = completion.token_ids
            choice["token_logprobs"] = completion.logprobs
        choices.append(choice)
    completion_tokens = sum(len(c.token_ids) for c in result.completions)
    state.metrics.observe(ENDPOINT, len(prompt.token_ids), completion_tokens, result.ttft_s, result.latency_s)
    response: dict[str, Any] = {
        "id": request.request_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": state.model_id,
        "choices": choices,
        "usage": _usage(len(prompt.token_ids), completion_tokens),
        "system_fingerprint": None,
    }
    if body.return_token_ids:
        response["prompt_token_ids"] = prompt.token_ids
        response["weight_version"] = result.weight_version
    return response


async def _stream(
    state: ServerState, body: ChatCompletionRequest, prompt: ChatPrompt, request: GenerateRequest
) -> AsyncIterator[str]:
    started = time.perf_counter()
    first_token: float | None = None
    streams = [ContentStream(prompt) for _ in range(request.params.n)]
    created = int(time.time())

    def chunk(choices: list[dict[str, Any]], **extra: Any) -> str:
        payload = {
            "id": request.request_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": state.model_id,
            "system_fingerprint": None,
            "choices": choices,
            **extra,
        }
        return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"

    opening = [
        {"index": i, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
        | ({"token_ids": [], "token_logprobs": []} if body.return_token_ids else {})
        for i in range(request.params.n)
    ]
    yield chunk(opening, **({"prompt_token_ids": prompt.token_ids} if body.return_token_ids else {}))
    try:
        async for delta in engine_stream(state.engine, request):
            if first_token is None and delta.token_ids:
                first_token = time.perf_counter()
            yield chunk([_delta_choice(state, body, streams[delta.index], delta)])
    except APIError as error:
        yield f"data: {json.dumps(error.body())}\n\n"
        return
    completion_tokens = sum(len(stream.token_ids) for stream in streams)
    now = time.perf_counter()
    state.metrics.observe(
        ENDPOINT, len(prompt.token_ids), completion_tokens, (first_token or now) - started, now - started
    )
    if body.stream_options and body.stream_options.include_usage:
        yield chunk([], usage=_usage(len(prompt.token_ids), completion_tokens))
    yield "data: [DONE]\n\n"


def _delta_choice(
    state: ServerState, body: ChatCompletionRequest, stream: ContentStream, delta: StreamDelta
) -> dict[str, Any]:
    content = stream.feed(delta.text, delta.token_ids)
    message: dict[str, Any] = {"content": content} if content else {}
    finish_reason: str | None = None
    if delta.finish_reason is not None:
        rest, output = stream.finish()
        if rest:
            message["content"] = content + rest
        if output.tool_calls:
            message["tool_calls"] = [{"index": k, **call} for k, call in enumerate(output.tool_calls)]
        finish_reason = "tool_calls" if output.tool_calls else delta.finish_reason
    choice: dict[str, Any] = {
        "index": delta.index,
        "delta": message,
        "logprobs": {
            "content": chat_logprobs(state.tokenizer, delta.token_ids, delta.logprobs, delta.top_logprobs)
        }
        if body.logprobs
        else None,
        "finish_reason": finish_reason,
    }
    if body.return_token_ids:
        choice["token_ids"] = delta.token_ids
        choice["token_logprobs"] = delta.logprobs
        if delta.finish_reason is not None:
            choice["weight_version"] = delta.weight_version
    return choice


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
