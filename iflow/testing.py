"""Test double for a model's choices: a scripted OpenAI-compatible server on a loopback port.

``ScriptedOpenAIServer`` answers ``POST /v1/chat/completions`` with the next reply of its script, in
the real wire format (SSE streaming or plain JSON), and records every request it received so tests can
check what the agent sent. It replaces only the model's decisions; everything else in a test (the agent
loop, tools, files, shells, sessions) is real.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse


@dataclass
class ScriptedReply:
    """One scripted answer: text, tool calls, or an HTTP error status (to exercise retries)."""

    content: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    status: int = 200
    completion_tokens: int | None = None


def say(text: str) -> ScriptedReply:
    return ScriptedReply(content=text)


def call(name: str, text: str = "", **arguments: Any) -> ScriptedReply:
    """A reply with one native tool call (and optional text before it)."""
    return ScriptedReply(content=text, tool_calls=[{"name": name, "arguments": arguments}])


def calls(*pairs: tuple[str, dict[str, Any]], text: str = "") -> ScriptedReply:
    """A reply with several native tool calls, in order."""
    return ScriptedReply(content=text, tool_calls=[{"name": n, "arguments": a} for n, a in pairs])


def text_call(name: str, text: str = "", **arguments: Any) -> ScriptedReply:
    """A tool call written in the text protocol, as a model without native tool calls does."""
    block = json.dumps({"name": name, "arguments": arguments})
    return ScriptedReply(content=f"{text}<tool_call>{block}</tool_call>")


def error(status: int, message: str = "scripted error") -> ScriptedReply:
    return ScriptedReply(content=message, status=status)


class ScriptedOpenAIServer:
    """Serves ``replies`` one per request; use as a context manager, talk to ``url``."""

    def __init__(
        self,
        replies: Iterable[ScriptedReply] = (),
        model: str = "scripted-model",
        api_key: str | None = None,
        send_usage: bool = True,
        chunk_chars: int = 7,
    ) -> None:
        self.model = model
        self.api_key = api_key
        self.send_usage = send_usage
        self.chunk_chars = chunk_chars
        self.requests: list[dict[str, Any]] = []
        self._replies: list[ScriptedReply] = list(replies)
        self._served = 0
        self._lock = threading.Lock()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._replies) - self._served

    def push(self, *replies: ScriptedReply) -> None:
        with self._lock:
            self._replies.extend(replies)

    def __enter__(self) -> ScriptedOpenAIServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        config = uvicorn.Config(self._app(), log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, name="scripted-llm", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the scripted OpenAI server did not start within 10 s")
            time.sleep(0.01)

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()

    def _next_reply(self) -> ScriptedReply | None:
        with self._lock:
            if self._served >= len(self._replies):
                return None
            reply = self._replies[self._served]
            self._served += 1
            return reply

    def _app(self) -> FastAPI:
        app = FastAPI(title="scripted OpenAI-compatible server (test double)")

        @app.get("/v1/models")
        def models() -> dict[str, Any]:
            return {"object": "list", "data": [{"id": self.model, "object": "model"}]}

        @app.post("/v1/chat/completions", response_model=None)
        async def chat(request: Request) -> JSONResponse | StreamingResponse:
            if self.api_key is not None and request.headers.get("authorization") != f"Bearer {self.api_key}":
                return JSONResponse({"error": {"message": "invalid API key"}}, status_code=401)
            body = await request.json()
            with self._lock:
                self.requests.append(body)
            reply = self._next_reply()
            if reply is None:
                message = f"scripted server: the script has no reply left (served {self._served})"
                return JSONResponse({"error": {"message": message}}, status_code=400)
            if reply.status != 200:
                return JSONResponse({"error": {"message": reply.content}}, status_code=reply.status)
            usage = self._usage(body, reply)
            wire_calls = self._tool_calls_wire(reply)
            if body.get("stream"):
                include_usage = self.send_usage and (body.get("stream_options") or {}).get("include_usage")
                chunks = self._stream_chunks(reply, wire_calls, usage if include_usage else None)
                return StreamingResponse(chunks, media_type="text/event-stream")
            return JSONResponse(self._full_response(reply, wire_calls, usage))

        return app

    def _usage(self, body: dict[str, Any], reply: ScriptedReply) -> dict[str, int]:
        prompt = len(json.dumps(body.get("messages", []))) // 4
        completion = reply.completion_tokens
        if completion is None:
            completion = (len(reply.content) + len(json.dumps(reply.tool_calls))) // 4 + 1
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    def _tool_calls_wire(self, reply: ScriptedReply) -> list[dict[str, Any]]:
        return [
            {
                "index": index,
                "id": f"call_s{self._served}_{index}",
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
            }
            for index, c in enumerate(reply.tool_calls)
        ]

    def _stream_chunks(
        self, reply: ScriptedReply, wire_calls: list[dict[str, Any]], usage: dict[str, int] | None
    ) -> Iterator[str]:
        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            payload = {
                "id": "chatcmpl-scripted",
                "object": "chat.completion.chunk",
                "model": self.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            return f"data: {json.dumps(payload)}\n\n"

        yield chunk({"role": "assistant"})
        text = reply.content
        for start in range(0, len(text), self.chunk_chars):
            yield chunk({"content": text[start : start + self.chunk_chars]})
        for part in wire_calls:
            arguments = part["function"]["arguments"]
            half = len(arguments) // 2
            yield chunk(
                {
                    "tool_calls": [
                        {
                            **part,
                            "function": {"name": part["function"]["name"], "arguments": arguments[:half]},
                        }
                    ]
                }
            )
            yield chunk(
                {"tool_calls": [{"index": part["index"], "function": {"arguments": arguments[half:]}}]}
            )
        yield chunk({}, "tool_calls" if reply.tool_calls else "stop")
        if usage is not None:
            payload = {
                "id": "chatcmpl-scripted",
                "object": "chat.completion.chunk",
                "choices": [],
                "usage": usage,
            }
            yield f"data: {json.dumps(payload)}\n\n"
        yield "data: [DONE]\n\n"

    def _full_response(
        self, reply: ScriptedReply, wire_calls: list[dict[str, Any]], usage: dict[str, int]
    ) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.tool_calls:
            message["tool_calls"] = [
                {key: value for key, value in part.items() if key != "index"} for part in wire_calls
            ]
        return {
            "id": "chatcmpl-scripted",
            "object": "chat.completion",
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if reply.tool_calls else "stop",
                }
            ],
            "usage": usage,
        }
