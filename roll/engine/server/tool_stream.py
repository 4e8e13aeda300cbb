"""Streaming content of an answer that may contain tool calls.

Text before the first `<tool_call>` streams as content as soon as it cannot be the start of a tag; the calls
themselves are parsed once the completion ends. What is streamed is always a prefix of the final parsed
content, so a client that concatenates the deltas sees the same message as a non-streaming request.
"""

from __future__ import annotations

from roll.models.chat import ChatPrompt
from roll.models.tool_calls import TOOL_CALL_OPEN, AssistantOutput


def _partial_tag_length(text: str) -> int:
    """Length of the longest suffix of `text` that could be the start of `<tool_call>`."""
    for length in range(min(len(TOOL_CALL_OPEN) - 1, len(text)), 0, -1):
        if TOOL_CALL_OPEN.startswith(text[-length:]):
            return length
    return 0


class ContentStream:
    def __init__(self, prompt: ChatPrompt) -> None:
        self._prompt = prompt
        self.text = ""
        self.token_ids: list[int] = []
        self._emitted = ""

    def feed(self, text: str, token_ids: list[int]) -> str:
        """Add generated text; returns the content that can be sent now."""
        self.text += text
        self.token_ids.extend(token_ids)
        if not self._prompt.parse_tool_calls:
            return text
        if self._prompt.forced_prefix:
            return ""
        cut = self.text.find(TOOL_CALL_OPEN)
        visible = (
            self.text[: len(self.text) - _partial_tag_length(self.text)] if cut == -1 else self.text[:cut]
        )
        # Whitespace around calls is trimmed from the final content, so it is held back until text follows it.
        return self._emit(visible.strip())

    def finish(self) -> tuple[str, AssistantOutput]:
        """The parsed answer, and the content not yet sent."""
        output = self._prompt.parse_output(self.text, self.token_ids)
        if not self._prompt.parse_tool_calls:
            return "", output
        content = output.content or ""
        return (content[len(self._emitted) :] if content.startswith(self._emitted) else ""), output

    def _emit(self, candidate: str) -> str:
        new = candidate[len(self._emitted) :]
        self._emitted = candidate
        return new
