"""Token accounting against the model's window, incremental across turns."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from iflow.types import ContextState, Message

# Chat templates add role markers and separators around every message; a flat allowance keeps the estimate
# on the safe side without knowing the template.
MESSAGE_OVERHEAD_TOKENS = 4


class TokenCounter(Protocol):
    """Counts tokens in a text. `name` identifies the counting rule (a state is valid for one name)."""

    name: str

    def count(self, text: str) -> int: ...


class CharEstimateCounter:
    """Estimate: one token per `chars_per_token` characters, rounded up (no tokenizer needed)."""

    def __init__(self, chars_per_token: int = 4) -> None:
        if chars_per_token < 1:
            raise ValueError(f"chars_per_token must be >= 1, got {chars_per_token}")
        self.chars_per_token = chars_per_token
        self.name = f"chars/{chars_per_token}"

    def count(self, text: str) -> int:
        return -(-len(text) // self.chars_per_token)


class TokenizerCounter:
    """Exact count with a Hugging Face tokenizer (anything with `encode(text, add_special_tokens=False)`)."""

    def __init__(self, tokenizer: Any, name: str | None = None) -> None:
        self.tokenizer = tokenizer
        self.name = name or f"tokenizer:{getattr(tokenizer, 'name_or_path', type(tokenizer).__name__)}"

    def count(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False)) if text else 0


def message_text(message: Message) -> str:
    """The text of a message's content (string content, or the text parts of a content list)."""
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if part.get("type") == "text")


def message_tokens(message: Message, counter: TokenCounter) -> int:
    """Tokens of one message: content, tool calls (name and arguments) and a per-message overhead."""
    total = MESSAGE_OVERHEAD_TOKENS + counter.count(message_text(message))
    for call in message.get("tool_calls") or ():
        function = call["function"]
        total += counter.count(function["name"]) + counter.count(function["arguments"])
    return total


def tool_schema_tokens(tools: Sequence[Mapping[str, Any]], counter: TokenCounter) -> int:
    """Tokens the tool schemas of a request take (their JSON), for `prepare(reserved_tokens=...)`."""
    return counter.count(json.dumps(list(tools), sort_keys=True)) if tools else 0


def content_key(message: Message) -> tuple[object, ...]:
    """A hashable key equal for messages with equal content (the cache key for fresh dict copies)."""
    content = message.get("content")
    if isinstance(content, list):
        content = json.dumps(content, sort_keys=True)
    calls = tuple(
        (call["function"]["name"], call["function"]["arguments"]) for call in message.get("tool_calls") or ()
    )
    return (message["role"], content, calls)


def count_tokens(
    messages: Sequence[Message], counter: TokenCounter, state: ContextState | None = None
) -> tuple[list[int], ContextState]:
    """Per-message token counts and the state to pass next time.

    Messages seen before (the same object, or equal content) are not recounted. The returned state holds
    the current messages and, for a while, the content of earlier ones (so a fresh copy of the history, as
    the proxy receives it, still hits); it is pruned back to the current messages when it gets past twice
    their number, so it stays in proportion to the history.
    """
    old = state if state is not None and state.counter_name == counter.name else ContextState()
    by_identity: dict[int, tuple[Message, int]] = {}
    by_content: dict[tuple[object, ...], int] = {}
    counts: list[int] = []
    for message in messages:
        hit = old.counts_by_identity.get(id(message))
        if hit is not None and hit[0] is message:
            n = hit[1]
        else:
            key = content_key(message)
            cached = old.counts_by_content.get(key)
            n = cached if cached is not None else message_tokens(message, counter)
            by_content[key] = n
        by_identity[id(message)] = (message, n)
        counts.append(n)
    # Identity hits skip the content key; carry those keys over so a fresh copy of the history still hits.
    for key, n in old.counts_by_content.items():
        by_content.setdefault(key, n)
    if len(by_content) > 2 * len(messages) + 64:
        by_content = {content_key(m): n for m, n in zip(messages, counts, strict=True)}
    return counts, ContextState(counter.name, by_identity, by_content)
