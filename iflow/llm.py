"""OpenAI-compatible chat client: streaming, retries, clear errors, native or text tool calls.

The agent keeps its history in the OpenAI shape (assistant ``tool_calls``, ``tool`` results). Models
served without a tool-call parser get the text protocol instead: the tool schemas go into the system
prompt, calls come back as ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks, and
this module translates the history both ways so the agent never sees the difference.

A host that runs the model's endpoint in its own process (ROLL's rollout worker, with the train-mode proxy
as a library) hands the client a ``ChatEndpoint`` instead: the same requests and answers, no HTTP.
"""

from __future__ import annotations

import functools
import json
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, NoReturn, Protocol

import httpx
from pydantic import BaseModel, ConfigDict, Field

from iflow.llm_text import TOOL_CALL_OPEN, TOOL_CALL_RE, ToolCallTextFilter, to_text_protocol
from iflow.types import ToolCall

TextSink = Callable[[str], None]

_RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504}


class LLMError(RuntimeError):
    """The model endpoint could not give an answer; the message says why and what to do."""


class EndpointError(Exception):
    """A ``ChatEndpoint`` refused a request: the message says why, ``status`` is the HTTP status the same
    answer would have over HTTP (the client treats both alike: 429/5xx/408/409 are retried)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class ChatEndpoint(Protocol):
    """An OpenAI chat endpoint in this process, for a host that runs the model's server side itself.

    ``chat`` takes the request body (never ``stream``) and returns the whole ``chat.completion``; it raises
    ``EndpointError`` for an answer an HTTP server would give as an error status, and ``TimeoutError`` when
    no answer came in ``timeout_s`` (it then stops the work it started). ``name`` names the endpoint in
    error messages."""

    @property
    def name(self) -> str: ...

    def chat(self, body: dict[str, Any], timeout_s: float) -> dict[str, Any]: ...


class LLMConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    base_url: str = Field(description="OpenAI-compatible endpoint, ending in /v1")
    api_key: str | None = Field(default=None, description="Bearer token; None sends no Authorization")
    model: str = Field(description="Model name sent in each request")
    timeout_s: float = Field(default=300.0, gt=0, description="Read timeout for one response")
    connect_timeout_s: float = Field(default=10.0, gt=0, description="Seconds to open a connection")
    max_retries: int = Field(default=4, ge=0, description="Retries on 429/5xx and connection errors")
    backoff_s: float = Field(default=1.0, ge=0, description="First retry delay; doubles each retry")
    tool_format: Literal["native", "text"] = Field(
        default="native", description="native: OpenAI tool_calls; text: <tool_call> blocks in the content"
    )
    temperature: float | None = Field(default=None, description="Sampling temperature; None: the server's")
    max_output_tokens: int | None = Field(
        default=None, gt=0, description="Cap on each reply's tokens (max_tokens); None: the server's"
    )


@dataclass
class ParsedToolCall:
    """A tool call as the agent runs it: its arguments decoded from the wire's JSON text (iflow.types.ToolCall
    is the call on the wire, which `to_message_part` gives back)."""

    id: str
    name: str
    arguments: dict[str, Any]
    # Set when the model's arguments were not a JSON object; the agent reports it back to the model.
    parse_error: str | None = None

    def to_message_part(self) -> ToolCall:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": json.dumps(self.arguments, ensure_ascii=False)},
        }


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: Usage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens

    def to_dict(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }


@dataclass
class LLMReply:
    content: str
    tool_calls: list[ParsedToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    # True when the server sent no usage and the counts are estimates (characters / 4).
    usage_estimated: bool = False

    def to_message(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [call.to_message_part() for call in self.tool_calls]
        return message


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """httpx's default TLS settings, built once per process: a client per episode would otherwise load the
    CA store each time (~20 ms of CPU)."""
    return httpx.create_ssl_context()


class LLMClient:
    """One OpenAI-compatible endpoint. ``complete`` streams text to ``on_text`` as it arrives.

    With ``endpoint`` the calls go to it in this process (``config.base_url`` is then not used)."""

    def __init__(
        self,
        config: LLMConfig,
        transport: httpx.BaseTransport | None = None,
        endpoint: ChatEndpoint | None = None,
    ) -> None:
        self.config = config
        self._endpoint = endpoint
        headers = {"Content-Type": "application/json"}
        if config.api_key:
            headers["Authorization"] = f"Bearer {config.api_key}"
        self._http = httpx.Client(
            base_url=config.base_url.rstrip("/"),
            headers=headers,
            timeout=httpx.Timeout(config.timeout_s, connect=config.connect_timeout_s),
            transport=transport,
            verify=_tls_context(),
        )
        self._call_counter = 0

    def close(self) -> None:
        self._http.close()

    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        on_text: TextSink | None = None,
    ) -> LLMReply:
        body = self._request_body(messages, tools or [])
        attempt = 0
        while True:
            emitted = False

            def sink(text: str) -> None:
                nonlocal emitted
                emitted = True
                if on_text is not None:
                    on_text(text)

            try:
                return self._stream_once(body, sink, messages)
            except _ToolsRejected:
                # The endpoint serves a model without tool-call support: use the text protocol from now on.
                self.config = self.config.model_copy(update={"tool_format": "text"})
                body = self._request_body(messages, tools or [])
                continue
            except _RetryableError as error:
                # Once text reached the user a silent retry would show it twice; fail instead.
                if emitted or attempt >= self.config.max_retries:
                    raise LLMError(f"{error} (after {attempt + 1} attempts)") from error
                time.sleep(error.retry_after if error.retry_after is not None else self._delay(attempt))
                attempt += 1

    def _delay(self, attempt: int) -> float:
        return min(self.config.backoff_s * (2**attempt), 30.0)

    def _request_body(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.config.model,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.config.tool_format == "text":
            body["messages"] = to_text_protocol(messages, tools)
        else:
            body["messages"] = messages
            if tools:
                body["tools"] = tools
        if self.config.temperature is not None:
            body["temperature"] = self.config.temperature
        if self.config.max_output_tokens is not None:
            body["max_tokens"] = self.config.max_output_tokens
        return body

    def _stream_once(
        self, body: dict[str, Any], on_text: TextSink, messages: list[dict[str, Any]]
    ) -> LLMReply:
        if self._endpoint is not None:
            return self._call_endpoint(self._endpoint, body, on_text, messages)
        url = self.config.base_url.rstrip("/") + "/chat/completions"
        try:
            with self._http.stream("POST", "/chat/completions", json=body) as response:
                if response.status_code != 200:
                    detail = response.read().decode("utf-8", "replace")[:500]
                    self._raise_for_status(
                        response.status_code, detail, response.headers.get("retry-after"), url
                    )
                return self._read_stream(response, on_text, messages)
        except httpx.ConnectError as error:
            raise _RetryableError(
                f"cannot reach the model endpoint {url} ({error}); check that the server is running and "
                "that baseUrl (settings) or --base-url points at it"
            ) from error
        except httpx.TimeoutException as error:
            raise _RetryableError(
                f"the model endpoint {url} did not answer in time ({type(error).__name__}); "
                "raise the timeout or check the server's load"
            ) from error
        except httpx.RemoteProtocolError as error:
            raise _RetryableError(f"the model endpoint {url} closed the connection ({error})") from error

    def _call_endpoint(
        self,
        endpoint: ChatEndpoint,
        body: dict[str, Any],
        on_text: TextSink,
        messages: list[dict[str, Any]],
    ) -> LLMReply:
        """One call of an in-process endpoint: the same request without streaming, the whole answer read
        as a stream of one event."""
        request = {key: value for key, value in body.items() if key not in ("stream", "stream_options")}
        try:
            response = endpoint.chat(request, self.config.timeout_s)
        except EndpointError as error:
            self._raise_for_status(error.status, str(error)[:500], None, endpoint.name)
        except TimeoutError as error:
            raise _RetryableError(
                f"the model endpoint {endpoint.name} did not answer in {self.config.timeout_s:g} s "
                "(the call was stopped); raise the timeout or check the engine's load"
            ) from error
        if not isinstance(response.get("choices"), list):
            raise LLMError(
                f"the model endpoint {endpoint.name} answered without choices: {str(response)[:200]}"
            )
        text_filter = ToolCallTextFilter(on_text)
        content_parts: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        finish_reason: str | None = None
        for choice in response["choices"][:1]:
            message = choice.get("message") or {}
            if message.get("content"):
                content_parts.append(message["content"])
                text_filter.feed(message["content"])
            for index, call in enumerate(message.get("tool_calls") or []):
                function = call.get("function") or {}
                calls[index] = {
                    "id": call.get("id") or "",
                    "name": function.get("name") or "",
                    "arguments": function.get("arguments") or "",
                }
            finish_reason = choice.get("finish_reason")
        text_filter.flush()
        usage = response.get("usage")
        return self._reply(
            "".join(content_parts),
            calls,
            Usage(
                prompt_tokens=int(usage.get("prompt_tokens") or 0),
                completion_tokens=int(usage.get("completion_tokens") or 0),
            )
            if usage
            else None,
            finish_reason,
            messages,
        )

    def _raise_for_status(self, status: int, detail: str, retry_after: str | None, url: str) -> NoReturn:
        if status in _RETRYABLE_STATUS:
            delay = float(retry_after) if retry_after and retry_after.isdigit() else None
            raise _RetryableError(
                f"the model endpoint {url} answered HTTP {status}: {detail}",
                retry_after=min(delay, 30.0) if delay is not None else None,
            )
        if status in (401, 403):
            raise LLMError(
                f"the model endpoint {url} rejected the API key (HTTP {status}): {detail}. Set apiKey in "
                "~/.iflow/settings.json, the IFLOW_apiKey environment variable, or pass --api-key"
            )
        if status == 404 and self._endpoint is None:
            raise LLMError(
                f"the model endpoint {url} does not exist (HTTP 404): {detail}. baseUrl should be the API "
                "root ending in /v1, e.g. http://127.0.0.1:8000/v1, and the model name must be served there"
            )
        if status == 400 and self.config.tool_format == "native" and "tool" in detail.lower():
            raise _ToolsRejected(detail)
        raise LLMError(f"the model endpoint {url} refused the request (HTTP {status}): {detail}")

    def _read_stream(
        self, response: httpx.Response, on_text: TextSink, messages: list[dict[str, Any]]
    ) -> LLMReply:
        content_parts: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        usage: Usage | None = None
        finish_reason: str | None = None
        text_filter = ToolCallTextFilter(on_text)
        for line in response.iter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            try:
                chunk = json.loads(data)
            except json.JSONDecodeError as error:
                raise LLMError(
                    f"the model endpoint sent a stream chunk that is not JSON: {data[:200]}"
                ) from error
            if chunk.get("error"):
                raise LLMError(f"the model endpoint reported an error mid-stream: {chunk['error']}")
            if chunk.get("usage"):
                usage = Usage(
                    prompt_tokens=int(chunk["usage"].get("prompt_tokens") or 0),
                    completion_tokens=int(chunk["usage"].get("completion_tokens") or 0),
                )
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                if delta.get("content"):
                    content_parts.append(delta["content"])
                    text_filter.feed(delta["content"])
                for part in delta.get("tool_calls") or []:
                    slot = calls.setdefault(
                        int(part.get("index", 0)), {"id": "", "name": "", "arguments": ""}
                    )
                    slot["id"] = part.get("id") or slot["id"]
                    function = part.get("function") or {}
                    slot["name"] += function.get("name") or ""
                    slot["arguments"] += function.get("arguments") or ""
                if choice.get("finish_reason"):
                    finish_reason = choice["finish_reason"]
        text_filter.flush()
        return self._reply("".join(content_parts), calls, usage, finish_reason, messages)

    def _reply(
        self,
        content: str,
        calls: dict[int, dict[str, str]],
        usage: Usage | None,
        finish_reason: str | None,
        messages: list[dict[str, Any]],
    ) -> LLMReply:
        """The answer's text and tool calls (native, else parsed from ``<tool_call>`` text) and its usage
        (estimated when the server sent none)."""
        tool_calls = [self._native_call(calls[index]) for index in sorted(calls)]
        if not tool_calls and TOOL_CALL_OPEN in content:
            content, tool_calls = self._text_calls(content)
        estimated = usage is None
        if usage is None:
            usage = Usage(
                prompt_tokens=len(json.dumps(messages, ensure_ascii=False)) // 4,
                completion_tokens=len(content) // 4 + sum(len(str(c.arguments)) // 4 for c in tool_calls),
            )
        return LLMReply(content, tool_calls, usage, finish_reason, usage_estimated=estimated)

    def _next_id(self) -> str:
        self._call_counter += 1
        return f"call_{self._call_counter}"

    def _native_call(self, slot: dict[str, str]) -> ParsedToolCall:
        arguments, error = parse_arguments(slot["arguments"])
        return ParsedToolCall(slot["id"] or self._next_id(), slot["name"], arguments, error)

    def _text_calls(self, content: str) -> tuple[str, list[ParsedToolCall]]:
        calls = []
        for block in TOOL_CALL_RE.findall(content):
            try:
                payload = json.loads(block)
            except json.JSONDecodeError as error:
                calls.append(
                    ParsedToolCall(self._next_id(), "", {}, f"the <tool_call> block is not JSON: {error}")
                )
                continue
            if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
                calls.append(
                    ParsedToolCall(
                        self._next_id(), "", {}, 'a <tool_call> block needs {"name": ..., "arguments": {...}}'
                    )
                )
                continue
            raw = payload.get("arguments", {})
            arguments, error = parse_arguments(raw if isinstance(raw, str) else json.dumps(raw))
            calls.append(ParsedToolCall(self._next_id(), payload["name"], arguments, error))
        return TOOL_CALL_RE.sub("", content).strip(), calls


class _RetryableError(Exception):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class _ToolsRejected(Exception):
    """HTTP 400 about tools on a native tool-call request."""


def parse_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    """Tool-call arguments as a dict, or an empty dict and a message the model can act on."""
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as error:
        return {}, f"the arguments are not valid JSON ({error}); send a JSON object"
    if not isinstance(value, dict):
        return {}, "the arguments must be a JSON object"
    return value, None
