"""Chat completions as server-sent events and back: answers are recorded whole and streamed on demand."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any


def completion_events(response: dict[str, Any]) -> Iterator[str]:
    """The SSE lines of a whole `chat.completion`: role, content, tool calls, finish reason, usage, [DONE]."""
    base = {
        "id": response.get("id", "chatcmpl-proxy"),
        "object": "chat.completion.chunk",
        "created": response.get("created", 0),
        "model": response.get("model", ""),
    }

    def event(choices: list[dict[str, Any]], **extra: Any) -> str:
        return f"data: {json.dumps({**base, 'choices': choices, **extra}, ensure_ascii=False)}\n\n"

    for choice in response.get("choices", []):
        index = choice.get("index", 0)
        message = choice.get("message") or {}
        yield event([{"index": index, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
        if message.get("content"):
            yield event([{"index": index, "delta": {"content": message["content"]}, "finish_reason": None}])
        calls = message.get("tool_calls") or []
        if calls:
            delta = {"tool_calls": [{"index": k, **call} for k, call in enumerate(calls)]}
            yield event([{"index": index, "delta": delta, "finish_reason": None}])
        yield event([{"index": index, "delta": {}, "finish_reason": choice.get("finish_reason", "stop")}])
    if response.get("usage"):
        yield event([], usage=response["usage"])
    yield "data: [DONE]\n\n"


class StreamAssembler:
    """Reads `chat.completion.chunk` events and builds the whole `chat.completion` they stream."""

    def __init__(self) -> None:
        self.response: dict[str, Any] = {"object": "chat.completion", "choices": []}
        self._choices: dict[int, dict[str, Any]] = {}
        self.done = False  # the stream's `[DONE]` has been read

    def feed_line(self, line: str) -> None:
        if not line.startswith("data:"):
            return
        data = line[5:].strip()
        if data == "[DONE]":
            self.done = True
        if not data or data == "[DONE]":
            return
        event = json.loads(data)
        if "error" in event:
            self.response["error"] = event["error"]
            return
        for key in ("id", "created", "model", "prompt_token_ids"):
            if key in event:
                self.response[key] = event[key]
        if event.get("usage"):
            self.response["usage"] = event["usage"]
        for part in event.get("choices", []):
            self._feed_choice(part)

    def _feed_choice(self, part: dict[str, Any]) -> None:
        index = part.get("index", 0)
        choice = self._choices.setdefault(
            index, {"index": index, "message": {"role": "assistant", "content": ""}, "finish_reason": None}
        )
        message = choice["message"]
        delta = part.get("delta") or {}
        message["content"] += delta.get("content") or ""
        for call in delta.get("tool_calls") or []:
            calls = message.setdefault("tool_calls", [])
            k = call.get("index", len(calls))
            while len(calls) <= k:
                calls.append({"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
            if call.get("id"):
                calls[k]["id"] = call["id"]
            function = call.get("function") or {}
            calls[k]["function"]["name"] += function.get("name") or ""
            calls[k]["function"]["arguments"] += function.get("arguments") or ""
        # ROLL's `return_token_ids` extension: each chunk's token ids and logprobs, and the weight version.
        for key in ("token_ids", "token_logprobs"):
            if key in part:
                choice.setdefault(key, []).extend(part[key])
        if "weight_version" in part:
            choice["weight_version"] = part["weight_version"]
        if part.get("finish_reason"):
            choice["finish_reason"] = part["finish_reason"]

    def result(self) -> dict[str, Any]:
        self.response["choices"] = [self._choices[k] for k in sorted(self._choices)]
        return self.response
