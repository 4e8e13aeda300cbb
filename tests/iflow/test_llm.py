"""The OpenAI-compatible client against the scripted server on loopback: streaming, retries, errors."""

from __future__ import annotations

import socket

import pytest

from iflow.llm import LLMClient, LLMConfig, LLMError
from iflow.llm_text import to_text_protocol
from iflow.testing import ScriptedOpenAIServer, ScriptedReply, call, error, say, text_call


def client(server: ScriptedOpenAIServer, **overrides: object) -> LLMClient:
    config = LLMConfig(base_url=server.url, model="scripted-model", backoff_s=0.0, **overrides)  # type: ignore[arg-type]
    return LLMClient(config)


def test_streams_text_and_reports_usage() -> None:
    with ScriptedOpenAIServer([say("Hello there, this streams in pieces.")]) as server:
        pieces: list[str] = []
        reply = client(server).complete([{"role": "user", "content": "hi"}], on_text=pieces.append)
    assert reply.content == "Hello there, this streams in pieces."
    assert len(pieces) > 1 and "".join(pieces) == reply.content
    assert reply.tool_calls == []
    assert reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens > 0
    assert not reply.usage_estimated
    assert server.requests[0]["stream"] is True


def test_native_tool_calls_are_assembled_from_stream_deltas() -> None:
    with ScriptedOpenAIServer([call("read_file", "Looking.", file_path="a.py", offset=3)]) as server:
        reply = client(server).complete([{"role": "user", "content": "x"}], tools=[{"type": "function"}])
    assert reply.content == "Looking."
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [
        ("read_file", {"file_path": "a.py", "offset": 3})
    ]
    message = reply.to_message()
    assert message["tool_calls"][0]["id"] == reply.tool_calls[0].id
    assert server.requests[0]["tools"] == [{"type": "function"}]


def test_text_fallback_parses_tool_call_blocks_and_hides_them_from_the_stream() -> None:
    with ScriptedOpenAIServer([text_call("glob", "I will search. ", pattern="**/*.py")]) as server:
        pieces: list[str] = []
        reply = client(server, tool_format="text").complete(
            [{"role": "system", "content": "sys"}, {"role": "user", "content": "x"}],
            tools=[{"type": "function", "function": {"name": "glob", "parameters": {}}}],
            on_text=pieces.append,
        )
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("glob", {"pattern": "**/*.py"})]
    assert reply.content == "I will search."
    assert "<tool_call>" not in "".join(pieces)
    sent = server.requests[0]
    assert "tools" not in sent
    assert (
        "<tool_call>" in sent["messages"][0]["content"] and '"name": "glob"' in sent["messages"][0]["content"]
    )


def test_text_protocol_translates_history_both_ways() -> None:
    history = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "glob", "arguments": '{"pattern": "*"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
    ]
    converted = to_text_protocol(history, [])
    assert converted[1] == {
        "role": "assistant",
        "content": '<tool_call>{"name": "glob", "arguments": {"pattern": "*"}}</tool_call>',
    }
    assert converted[2] == {"role": "user", "content": '<tool_response name="glob">\na.py\n</tool_response>'}


def test_invalid_arguments_are_reported_not_raised() -> None:
    reply = ScriptedReply(content="<tool_call>{not json}</tool_call>")
    with ScriptedOpenAIServer([reply]) as server:
        result = client(server).complete([{"role": "user", "content": "x"}])
    assert len(result.tool_calls) == 1 and "not JSON" in (result.tool_calls[0].parse_error or "")


def test_retries_429_and_5xx_then_succeeds() -> None:
    with ScriptedOpenAIServer([error(429), error(503), say("finally")]) as server:
        reply = client(server, max_retries=3).complete([{"role": "user", "content": "x"}])
    assert reply.content == "finally"
    assert len(server.requests) == 3


def test_gives_up_after_max_retries_with_the_status() -> None:
    with (
        ScriptedOpenAIServer([error(500, "boom")] * 3) as server,
        pytest.raises(LLMError, match=r"HTTP 500.*boom.*after 3 attempts"),
    ):
        client(server, max_retries=2).complete([{"role": "user", "content": "x"}])


def test_wrong_api_key_says_where_to_set_it() -> None:
    with ScriptedOpenAIServer([say("never")], api_key="right") as server:
        with pytest.raises(LLMError, match=r"rejected the API key.*--api-key"):
            client(server, api_key="wrong").complete([{"role": "user", "content": "x"}])
        assert client(server, api_key="right").complete([{"role": "user", "content": "x"}]).content == "never"


def test_unreachable_endpoint_is_named() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = LLMConfig(base_url=f"http://127.0.0.1:{port}/v1", model="m", max_retries=1, backoff_s=0.0)
    with pytest.raises(
        LLMError, match=rf"cannot reach the model endpoint http://127.0.0.1:{port}/v1.*--base-url"
    ):
        LLMClient(config).complete([{"role": "user", "content": "x"}])


def test_missing_usage_is_estimated() -> None:
    with ScriptedOpenAIServer([say("some words here")], send_usage=False) as server:
        reply = client(server).complete([{"role": "user", "content": "hello " * 40}])
    assert reply.usage_estimated
    assert reply.usage.prompt_tokens > 40 and reply.usage.completion_tokens > 0


def test_an_endpoint_that_rejects_tools_gets_the_text_protocol() -> None:
    replies = [
        error(400, '"auto" tool choice requires --enable-auto-tool-choice'),
        text_call("glob", pattern="*"),
    ]
    tools = [{"type": "function", "function": {"name": "glob", "parameters": {}}}]
    with ScriptedOpenAIServer(replies) as server:
        llm = client(server)
        reply = llm.complete([{"role": "user", "content": "x"}], tools=tools)
        assert "tools" in server.requests[0] and "tools" not in server.requests[1]
    assert [c.name for c in reply.tool_calls] == ["glob"]
    assert llm.config.tool_format == "text"


def test_other_client_errors_are_not_retried() -> None:
    with ScriptedOpenAIServer([error(400, "messages must not be empty"), say("unused")]) as server:
        with pytest.raises(LLMError, match=r"refused the request \(HTTP 400\): .*messages must not be empty"):
            client(server).complete([{"role": "user", "content": "x"}])
        assert len(server.requests) == 1
