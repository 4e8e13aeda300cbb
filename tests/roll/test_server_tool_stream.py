"""Streaming tool-aware content: what streams is always a prefix of the final parsed content."""

from __future__ import annotations

import json

import pytest

from roll.engine.server.tool_stream import ContentStream
from roll.models import ChatPrompt

TOOLS_PROMPT = ChatPrompt(token_ids=[1], text="", parse_tool_calls=True)
PLAIN_PROMPT = ChatPrompt(token_ids=[1], text="")


def stream_in_pieces(
    prompt: ChatPrompt, text: str, piece: int
) -> tuple[list[str], str, list[tuple[str, dict]]]:
    stream = ContentStream(prompt)
    sent = [stream.feed(text[i : i + piece], [i]) for i in range(0, len(text), piece)]
    rest, output = stream.finish()
    assert output.token_ids == list(range(0, len(text), piece))
    calls = [
        (call["function"]["name"], json.loads(call["function"]["arguments"])) for call in output.tool_calls
    ]
    assert "".join(sent) + rest == (output.content or "")
    return sent, rest, calls


@pytest.mark.parametrize("piece", [1, 2, 3, 7, 1000])
def test_content_before_a_call_streams_and_the_call_does_not(piece: int) -> None:
    text = ' Let me look. \n<tool_call>\n{"name": "f", "arguments": {"q": "<tool"}}\n</tool_call>\n'
    sent, rest, calls = stream_in_pieces(TOOLS_PROMPT, text, piece)
    assert "".join(sent) + rest == "Let me look."
    assert "<" not in "".join(sent)
    assert calls == [("f", {"q": "<tool"})]


@pytest.mark.parametrize("piece", [1, 4, 1000])
def test_text_that_only_looks_like_a_tag_start_is_released(piece: int) -> None:
    text = "a <tool b <to c"
    sent, rest, calls = stream_in_pieces(TOOLS_PROMPT, text, piece)
    assert "".join(sent) == text  # all of it streamed before the end: no tag ever opened
    assert rest == "" and calls == []


def test_a_broken_call_ends_up_in_the_content() -> None:
    text = 'ok <tool_call>{"name": oops}</tool_call> done'
    sent, rest, calls = stream_in_pieces(TOOLS_PROMPT, text, 2)
    assert "".join(sent) == "ok"
    assert rest == ' <tool_call>{"name": oops}</tool_call> done'
    assert calls == []


def test_without_tools_text_streams_unchanged() -> None:
    text = "  <tool_call> is just text here  "
    sent, rest, calls = stream_in_pieces(PLAIN_PROMPT, text, 3)
    assert "".join(sent) == text and rest == "" and calls == []


def test_a_forced_call_streams_nothing_until_the_end() -> None:
    prompt = ChatPrompt(
        token_ids=[1],
        text="",
        parse_tool_calls=True,
        forced_tool="f",
        forced_prefix='<tool_call>\n{"name": "f", "arguments": ',
    )
    sent, rest, calls = stream_in_pieces(prompt, '{"x": 1}}\n', 2)
    assert sent == [""] * len(sent) and rest == ""
    assert calls == [("f", {"x": 1})]
