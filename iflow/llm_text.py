"""The text tool-call protocol, for models served without native tool calls.

Tool schemas go into the system prompt; the model writes ``<tool_call>{"name": ..., "arguments": {...}}
</tool_call>`` blocks; results go back as ``<tool_response name="...">`` user messages. ``to_text_protocol``
rewrites an OpenAI-shaped history that way, and ``ToolCallTextFilter`` keeps the blocks out of what people
see while the reply streams.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
TOOL_CALL_RE = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


class ToolCallTextFilter:
    """Streams content to the sink but holds back ``<tool_call>`` blocks, which are not for people."""

    def __init__(self, sink: Callable[[str], None]) -> None:
        self._sink = sink
        self._pending = ""
        self._inside = False

    def feed(self, text: str) -> None:
        self._pending += text
        while self._pending:
            if self._inside:
                end = self._pending.find(TOOL_CALL_CLOSE)
                if end < 0:
                    return
                self._pending = self._pending[end + len(TOOL_CALL_CLOSE) :]
                self._inside = False
                continue
            start = self._pending.find(TOOL_CALL_OPEN)
            if start >= 0:
                self._emit(self._pending[:start])
                self._pending = self._pending[start + len(TOOL_CALL_OPEN) :]
                self._inside = True
                continue
            keep = _partial_prefix_length(self._pending, TOOL_CALL_OPEN)
            self._emit(self._pending[: len(self._pending) - keep])
            self._pending = self._pending[len(self._pending) - keep :]
            return

    def flush(self) -> None:
        if not self._inside:
            self._emit(self._pending)
        self._pending = ""

    def _emit(self, text: str) -> None:
        if text:
            self._sink(text)


def _partial_prefix_length(text: str, tag: str) -> int:
    for length in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:length]):
            return length
    return 0


TEXT_PROTOCOL_INSTRUCTIONS = """\
# Calling tools
You can call the tools below. To call one, write a block exactly like this (one block per call):
<tool_call>{"name": "TOOL_NAME", "arguments": {"ARG": "VALUE"}}</tool_call>
Results come back in <tool_response> blocks. When the task is done, answer without any <tool_call>.

Available tools (JSON schemas):
"""


def to_text_protocol(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same conversation for a model without native tool calls."""
    converted: list[dict[str, Any]] = []
    names_by_id: dict[str, str] = {}
    for message in messages:
        role = message.get("role")
        if role == "assistant" and message.get("tool_calls"):
            names_by_id.update({call["id"]: call["function"]["name"] for call in message["tool_calls"]})
            blocks = [
                TOOL_CALL_OPEN
                + json.dumps(
                    {
                        "name": call["function"]["name"],
                        "arguments": json.loads(call["function"]["arguments"] or "{}"),
                    },
                    ensure_ascii=False,
                )
                + TOOL_CALL_CLOSE
                for call in message["tool_calls"]
            ]
            text = "\n".join(part for part in [message.get("content") or "", *blocks] if part)
            converted.append({"role": "assistant", "content": text})
        elif role == "tool":
            name = names_by_id.get(message.get("tool_call_id", ""), "")
            converted.append(
                {
                    "role": "user",
                    "content": f'<tool_response name="{name}">\n{message.get("content", "")}\n'
                    "</tool_response>",
                }
            )
        else:
            converted.append(dict(message))
    if tools:
        schemas = "\n".join(json.dumps(tool["function"], ensure_ascii=False) for tool in tools)
        instructions = TEXT_PROTOCOL_INSTRUCTIONS + schemas
        if converted and converted[0].get("role") == "system":
            converted[0] = {**converted[0], "content": f"{converted[0]['content']}\n\n{instructions}"}
        else:
            converted.insert(0, {"role": "system", "content": instructions})
    return converted
