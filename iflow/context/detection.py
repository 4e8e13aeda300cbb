"""Detection on message lists: failed tool calls, identical consecutive tool calls, repeated output."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from iflow.context.tokens import message_text
from iflow.types import EXIT_CODE_PATTERN, TOOL_ERROR_PREFIX, Message, ToolCall

CODE_BLOCK = re.compile(r"```.*?```", re.DOTALL)


# Arguments up to this long are memoized (the same calls are met again every turn); longer ones, such as a
# whole file being written, are canonicalized each time so the cache stays small.
CACHED_ARGUMENTS_CHARS = 1024


def canonical_arguments(arguments: str) -> str:
    """Arguments JSON with sorted keys and no spacing, so equal calls compare equal; invalid JSON as is."""
    if len(arguments) <= CACHED_ARGUMENTS_CHARS:
        return _canonical_cached(arguments)
    return _canonical(arguments)


def _canonical(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), sort_keys=True, separators=(",", ":"))
    except ValueError:
        return arguments.strip()


_canonical_cached = lru_cache(maxsize=4096)(_canonical)


def call_key(call: ToolCall) -> tuple[str, str]:
    """What makes two tool calls identical: the tool's name and its canonical arguments."""
    return call["function"]["name"], canonical_arguments(call["function"]["arguments"])


def is_tool_failure(message: Message) -> bool:
    """Whether a tool result reports failure: an `Error: ` prefix, or a last line `Exit code: N` with N != 0.

    Only the last line counts, so output that merely contains such a line (a log being read) is no failure.
    """
    if message["role"] != "tool":
        return False
    text = message_text(message)
    if text.startswith(TOOL_ERROR_PREFIX):
        return True
    last_line = text.rstrip().rpartition("\n")[2].strip()
    code = EXIT_CODE_PATTERN.fullmatch(last_line)
    return code is not None and int(code.group(1)) != 0


@dataclass(frozen=True)
class ToolLoop:
    """The last `count` tool calls were all the same call."""

    name: str
    arguments: str
    count: int


def detect_tool_loop(messages: Sequence[Message], threshold: int) -> ToolLoop | None:
    """The run of identical tool calls ending the history, if it is at least `threshold` long.

    Calls are read across assistant messages, newest first; the run breaks at the first different call or
    at a user message (the user stepping in resets the count).
    """
    run = 0
    last: tuple[str, str] | None = None
    for message in reversed(messages):
        role = message["role"]
        if role == "user" and not _is_reminder_only(message):
            break
        if role != "assistant":
            continue
        calls = message.get("tool_calls") or ()
        if not calls:
            break
        for call in reversed(calls):
            key = call_key(call)
            if last is None:
                last = key
            elif key != last:
                return ToolLoop(last[0], last[1], run) if run >= threshold else None
            run += 1
    if last is not None and run >= threshold:
        return ToolLoop(last[0], last[1], run)
    return None


def detect_repeated_chunks(text: str, chunk_chars: int, repeats: int) -> str | None:
    """A `chunk_chars`-long piece of `text` that occurs at least `repeats` times without overlapping.

    Degenerate generation repeats a phrase over and over; every period of the repetition shows up as one
    chunk occurring many times. Closed code blocks are left out: code and tables repeat by nature.
    Returns the first such chunk (by position), or None.
    """
    text = CODE_BLOCK.sub("", text)
    if len(text) < chunk_chars * repeats:
        return None
    seen: dict[str, tuple[int, int]] = {}  # chunk -> (occurrences, end of the last counted occurrence)
    for start in range(len(text) - chunk_chars + 1):
        chunk = text[start : start + chunk_chars]
        if chunk.isspace():
            continue
        occurrences, end = seen.get(chunk, (0, -1))
        if start >= end:
            occurrences += 1
            if occurrences >= repeats:
                return chunk
            seen[chunk] = (occurrences, start + chunk_chars)
    return None


def _is_reminder_only(message: Message) -> bool:
    text = message_text(message).strip()
    return text.startswith("<system-reminder>") and text.endswith("</system-reminder>")
