"""Tool calls back out of generated text: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks.

The generated token ids travel unchanged next to the parsed message: training sees exactly what was sampled.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from pydantic import BaseModel

from iflow.types import ToolCall

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"


class AssistantOutput(BaseModel):
    """Generated text split into content and tool calls (OpenAI's wire shape, iflow.types.ToolCall: the
    arguments a JSON object encoded as a string); `token_ids` are exactly the generated ids."""

    content: str | None
    tool_calls: list[ToolCall]
    token_ids: list[int]

    def to_openai_message(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = list(self.tool_calls)
        return message


def parse_assistant_output(
    text: str, token_ids: list[int], *, forced_prefix: str = "", forced_tool: str | None = None
) -> AssistantOutput:
    """Split generated `text` (continuing `forced_prefix`) into content and `<tool_call>` calls.

    With `forced_tool`, the prompt ended inside a call of that tool, so the text starts with its arguments
    object. A block whose JSON is not a `{"name": str, "arguments": object}` stays in the content, so nothing
    the model wrote is lost. A final block left open (generation stopped before `</tool_call>`) is parsed too.
    """
    calls: list[ToolCall] = []
    if forced_tool is not None:
        forced_call, rest = _parse_forced_arguments(text, forced_tool)
        if forced_call:
            calls.append(forced_call)
            text, forced_prefix = rest, ""
    full = forced_prefix + text
    content_parts: list[str] = []
    position = 0
    while (start := full.find(TOOL_CALL_OPEN, position)) != -1:
        end = full.find(TOOL_CALL_CLOSE, start)
        body_end = len(full) if end == -1 else end
        after = len(full) if end == -1 else end + len(TOOL_CALL_CLOSE)
        call = _parse_call(full[start + len(TOOL_CALL_OPEN) : body_end])
        content_parts.append(full[position:start] if call else full[position:after])
        if call:
            calls.append(call)
        position = after
    content_parts.append(full[position:])
    content = "".join(content_parts).strip()
    return AssistantOutput(content=content or None, tool_calls=calls, token_ids=list(token_ids))


def _parse_forced_arguments(text: str, name: str) -> tuple[ToolCall | None, str]:
    """The arguments object that opens `text`, and what follows the call's closing brace and tag."""
    stripped = text.lstrip()
    try:
        arguments, end = json.JSONDecoder().raw_decode(stripped)
    except json.JSONDecodeError:
        return None, text
    if not isinstance(arguments, dict):
        return None, text
    rest = stripped[end:].lstrip().removeprefix("}").lstrip().removeprefix(TOOL_CALL_CLOSE)
    return _tool_call(name, arguments), rest


def _tool_call(name: str, arguments: dict[str, Any]) -> ToolCall:
    return {
        "id": f"call_{uuid.uuid4().hex[:24]}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)},
    }


def _parse_call(body: str) -> ToolCall | None:
    try:
        value, _ = json.JSONDecoder().raw_decode(body.strip())
    except json.JSONDecodeError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return None
    arguments = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return None
    if not isinstance(arguments, dict):
        return None
    return _tool_call(value["name"], arguments)
