"""Compression tiers: the light pass (no LLM) and the full summary (request, then apply the LLM's reply)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import lru_cache

from iflow.context.detection import CACHED_ARGUMENTS_CHARS, call_key
from iflow.context.tokens import TokenCounter, message_text, message_tokens
from iflow.types import CompressionReport, ContextConfig, Message, SummaryRequest, ToolCall

SUMMARY_PROMPT = """\
You compress the working history of a coding agent so it can continue the same task with a fresh context.
The history follows as a transcript. Write a summary with exactly these Markdown sections, in this order:

## Goal
The user's requests and what counts as done, in the user's words where wording matters.
## Constraints and preferences
Rules the user set, conventions of the project, approaches that were rejected.
## Key knowledge
Facts learned: commands that work, APIs and their signatures, causes of errors met and how they were fixed.
## Files
Every file read, created or changed: its path, what changed and why, what is still to change.
## Done
Steps completed, with their results.
## Current state
What was in progress when the history was cut, including any command or edit whose outcome is unknown.
## Next steps
The plan from here, first step first.

Be specific: paths, names, commands, numbers, error messages. Write nothing outside the sections and call no
tools."""

SUMMARY_INTRO = "This session continues from an earlier conversation that outgrew the context window."
TRANSCRIPT_RESULT_CHARS = 2000


def threshold_tokens(ratio: float, window: int) -> int:
    """The smallest token count at or above `ratio` of `window` (exact for ratios like 0.6 and 0.8)."""
    return -(-round(ratio * window * 1_000_000) // 1_000_000)


def protected_start(messages: Sequence[Message], keep: int, floor: int = 0) -> int:
    """Start of the last `keep` messages, moved back so the range never begins inside a call's results."""
    start = max(floor, len(messages) - keep)
    while start > floor and messages[start]["role"] == "tool":
        start -= 1
    return start


def _path_of(call: ToolCall, config: ContextConfig) -> str | None:
    try:
        arguments = json.loads(call["function"]["arguments"])
    except ValueError:
        return None
    if not isinstance(arguments, dict):
        return None
    for key in config.path_argument_keys:
        if isinstance(arguments.get(key), str):
            return arguments[key]
    return None


def _reduced_arguments(call: ToolCall, config: ContextConfig) -> str | None:
    """The call's arguments reduced to its file path, or None when there is nothing to reduce."""
    arguments = call["function"]["arguments"]
    if len(arguments) <= CACHED_ARGUMENTS_CHARS:  # reduced calls are short and met again every turn
        return _reduced_cached(arguments, config.path_argument_keys)
    return _reduced(arguments, config.path_argument_keys)


def _reduced(arguments_json: str, path_keys: tuple[str, ...]) -> str | None:
    try:
        arguments = json.loads(arguments_json)
    except ValueError:
        return None
    if not isinstance(arguments, dict):
        return None
    for key in path_keys:
        if isinstance(arguments.get(key), str):
            return None if len(arguments) == 1 else json.dumps({key: arguments[key]})
    return None


_reduced_cached = lru_cache(maxsize=4096)(_reduced)


def light_pass(messages: Sequence[Message], config: ContextConfig) -> tuple[list[Message], int, int]:
    """Drop earlier repeats of identical read-only calls (with their results) and reduce old write arguments.

    The last `config.keep_recent_messages` messages are left as they are. Returns the new history, the
    number of tool calls dropped and the number of write calls whose arguments were reduced. Messages that
    change are new dicts; the input is never modified.
    """
    protect = protected_start(messages, config.keep_recent_messages)
    read_only = set(config.read_only_tools)
    write = set(config.write_tools)
    latest: dict[tuple[str, str], str] = {}
    for message in messages:
        for call in message.get("tool_calls") or ():
            if call["function"]["name"] in read_only:
                latest[call_key(call)] = call["id"]

    dropped_ids: set[str] = set()
    result: list[Message] = []
    elided = 0
    for index, message in enumerate(messages):
        if index >= protect:
            result.extend(messages[index:])
            break
        if message["role"] == "tool":
            if message.get("tool_call_id") not in dropped_ids:
                result.append(message)
            continue
        calls = message.get("tool_calls")
        if not calls:
            result.append(message)
            continue
        kept: list[ToolCall] = []
        for call in calls:
            name = call["function"]["name"]
            if name in read_only and latest[call_key(call)] != call["id"]:
                dropped_ids.add(call["id"])
                continue
            reduced = _reduced_arguments(call, config) if name in write else None
            if reduced is not None:
                call = {**call, "function": {"name": name, "arguments": reduced}}
                elided += 1
            kept.append(call)
        if kept == calls:
            result.append(message)
        elif kept:
            result.append({**message, "tool_calls": kept})
        elif message_text(message).strip():
            updated: Message = {k: v for k, v in message.items() if k != "tool_calls"}  # type: ignore[assignment]
            result.append(updated)
    return result, len(dropped_ids), elided


def _render(message: Message, names: Mapping[str, str]) -> str:
    role = message["role"]
    text = message_text(message)
    if role == "tool":
        call_id = message.get("tool_call_id", "?")
        if len(text) > TRANSCRIPT_RESULT_CHARS:
            half = TRANSCRIPT_RESULT_CHARS // 2
            cut = len(text) - TRANSCRIPT_RESULT_CHARS
            text = f"{text[:half]}\n[... {cut} characters cut ...]\n{text[-half:]}"
        return f"[tool result of {names.get(call_id, 'a tool')} ({call_id})]\n{text}"
    parts = [f"[{role}]\n{text}"] if text.strip() else [f"[{role}]"]
    for call in message.get("tool_calls") or ():
        function = call["function"]
        parts.append(f"-> call {function['name']}({function['arguments']}) id={call['id']}")
    return "\n".join(parts)


def summary_request_from_counts(
    messages: Sequence[Message], counts: Sequence[int], config: ContextConfig
) -> SummaryRequest | None:
    """The summary call for this history (None when all but the leading system messages must stay)."""
    head_end = 0
    while head_end < len(messages) and messages[head_end]["role"] == "system":
        head_end += 1
    start = protected_start(messages, config.keep_recent_messages, floor=head_end)
    budget = config.recent_token_ratio * config.context_window
    while sum(counts[start:]) > budget:
        following = start + 1
        while following < len(messages) and messages[following]["role"] == "tool":
            following += 1
        if following >= len(messages):
            break
        start = following
    summarized = tuple(messages[head_end:start])
    if all(message_text(m).startswith(SUMMARY_INTRO) for m in summarized):
        return None  # nothing new since the last summary: summarizing it again would not free anything
    names = {call["id"]: call["function"]["name"] for m in summarized for call in m.get("tool_calls") or ()}
    touched: dict[str, None] = {}
    tracked = set(config.file_tools)
    for message in reversed(summarized):
        for call in reversed(message.get("tool_calls") or ()):
            path = _path_of(call, config) if call["function"]["name"] in tracked else None
            if path is not None:
                touched.setdefault(path, None)
    transcript = "\n\n".join(_render(m, names) for m in summarized)
    request: tuple[Message, ...] = (
        {"role": "system", "content": SUMMARY_PROMPT},
        {"role": "user", "content": f"<transcript>\n{transcript}\n</transcript>\n\nWrite the summary now."},
    )
    return SummaryRequest(
        request, tuple(messages[:head_end]), summarized, tuple(messages[start:]), tuple(touched)
    )


def build_summary_request(
    messages: Sequence[Message], config: ContextConfig, counter: TokenCounter
) -> SummaryRequest | None:
    """The full-summary call for `messages` (what `/compress` asks for); None if nothing can be summarized."""
    return summary_request_from_counts(messages, [message_tokens(m, counter) for m in messages], config)


def apply_summary(
    request: SummaryRequest,
    summary: str,
    config: ContextConfig,
    counter: TokenCounter,
    file_contents: Mapping[str, str] | None = None,
) -> tuple[list[Message], CompressionReport]:
    """The new history: leading system messages, the summary, recently touched files, the recent messages.

    `file_contents` maps touched paths to their current text (read by the caller); files are attached most
    recent first while they fit `config.touched_files_token_ratio` of the window, the rest are only named.
    """
    if not summary.strip():
        raise ValueError(
            "the summary reply is empty, so the history cannot be replaced; make the summary call again "
            "(or lower the load on the model) before calling apply_summary"
        )
    contents = file_contents or {}
    budget = config.touched_files_token_ratio * config.context_window
    attached: list[str] = []
    named: list[str] = []
    used = 0
    for path in request.touched_files:
        if path in contents:
            block = f"--- {path} ---\n{contents[path]}"
            cost = counter.count(block)
            if used + cost <= budget:
                attached.append(block)
                used += cost
                continue
        named.append(path)
    parts = [f"{SUMMARY_INTRO} Summary of the earlier part:\n\n<summary>\n{summary.strip()}\n</summary>"]
    if attached:
        parts.append(
            "Current contents of files you worked on, most recent first:\n\n" + "\n\n".join(attached)
        )
    if named:
        parts.append("Other files you worked on (read them again before editing): " + ", ".join(named))
    messages: list[Message] = [
        *request.head,
        {"role": "user", "content": "\n\n".join(parts)},
        *request.recent,
    ]
    before = sum(message_tokens(m, counter) for m in (*request.head, *request.summarized, *request.recent))
    after = sum(message_tokens(m, counter) for m in messages)
    report = CompressionReport("summary", before, after, summarized_messages=len(request.summarized))
    return messages, report
