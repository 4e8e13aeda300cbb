"""`<system-reminder>` blocks for what happened since the model's last reply, and where they go.

Reminders are derived from the tail of the history (the messages after the last assistant message) plus the
caller's `ContextInputs`, and placed at the end: appended to the last message when it is a user message,
otherwise as one new user message. A block already present in the tail is not added again, which makes
`prepare` idempotent without remembering anything between calls.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from iflow.context.compress import SUMMARY_INTRO
from iflow.context.detection import detect_repeated_chunks, detect_tool_loop, is_tool_failure
from iflow.context.tokens import message_text
from iflow.types import (
    REMINDER_CLOSE,
    REMINDER_OPEN,
    TOOL_ERROR_PREFIX,
    ContextConfig,
    ContextInputs,
    EnvironmentSnapshot,
    Message,
    Reminder,
    ReminderKind,
    ToolCall,
)

MAX_LISTING_ENTRIES = 50
MAX_ERROR_CHARS = 300


def reminder_block(kind: ReminderKind, body: str) -> Reminder:
    return Reminder(kind, f"{REMINDER_OPEN}\n{body.strip()}\n{REMINDER_CLOSE}")


def environment_reminder(env: EnvironmentSnapshot) -> Reminder:
    listing = list(env.listing[:MAX_LISTING_ENTRIES])
    if len(env.listing) > MAX_LISTING_ENTRIES:
        listing.append(f"... and {len(env.listing) - MAX_LISTING_ENTRIES} more")
    lines = [
        "This is the environment the session started in.",
        f"Date: {env.date}",
        f"OS: {env.os}",
        f"Working directory: {env.cwd}",
        "Files in the working directory:",
        *(f"  {entry}" for entry in listing),
    ]
    if env.git_status is None:
        lines.append("Git: not a git repository")
    else:
        lines += ["Git status:", env.git_status.rstrip() or "  (clean)"]
    lines.append(f"Available tools: {', '.join(env.tools)}")
    return reminder_block("environment", "\n".join(lines))


def tail_start(messages: Sequence[Message]) -> int:
    """Index of the first message after the last assistant message (0 when there is none)."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index]["role"] == "assistant":
            return index + 1
    return 0


def tail_reminders(
    messages: Sequence[Message], config: ContextConfig, inputs: ContextInputs
) -> list[Reminder]:
    """Every reminder the current tail calls for, in a fixed order (present ones included)."""
    start = tail_start(messages)
    reminders: list[Reminder] = []
    if inputs.environment is not None and start == 0 and not _is_summarized(messages):
        reminders.append(environment_reminder(inputs.environment))
    for change in inputs.modified_files:
        detail = f"\n{change.detail.strip()}" if change.detail.strip() else ""
        reminders.append(
            reminder_block(
                "file-modified",
                f"{change.path} was modified outside your tools since you last saw it. "
                f"Read it again before relying on or editing its contents.{detail}",
            )
        )
    if start == 0:
        return reminders
    calls = {call["id"]: call for call in messages[start - 1].get("tool_calls") or ()}
    for message in messages[start:]:
        if message["role"] == "tool" and is_tool_failure(message):
            reminders.append(_failure_reminder(message, calls.get(message.get("tool_call_id", ""))))
    for call in calls.values():
        if call["function"]["name"] == "todo_write":
            reminder = _todo_reminder(call, messages[start:])
            if reminder is not None:
                reminders.append(reminder)
    loop = detect_tool_loop(messages, config.loop_threshold)
    if loop is not None:
        reminders.append(
            reminder_block(
                "loop-detected",
                f"You have made the same call {loop.count} times in a row: {loop.name}({loop.arguments}). "
                "It is not getting you closer to the goal. Stop repeating it: change the approach, "
                "or tell the user what is blocking you.",
            )
        )
    reply = message_text(messages[start - 1])[-config.chunk_chars * config.chunk_repeats * 8 :]
    chunk = detect_repeated_chunks(reply, config.chunk_chars, config.chunk_repeats)
    if chunk is not None:
        reminders.append(
            reminder_block(
                "loop-detected",
                f"Your last reply repeats the same text over and over ({chunk.strip()!r} at least "
                f"{config.chunk_repeats} times). Stop repeating it and continue with the task.",
            )
        )
    return reminders


def _is_summarized(messages: Sequence[Message]) -> bool:
    """Whether a summary replaced earlier history: the session started long ago, its snapshot is stale."""
    first = next((m for m in messages if m["role"] != "system"), None)
    return first is not None and first["role"] == "user" and message_text(first).startswith(SUMMARY_INTRO)


def _failure_reminder(result: Message, call: ToolCall | None) -> Reminder:
    name = call["function"]["name"] if call is not None else "a tool"
    text = message_text(result).strip()
    if text.startswith(TOOL_ERROR_PREFIX):
        reason = text.removeprefix(TOOL_ERROR_PREFIX).splitlines()[0]
        reason = reason if len(reason) <= MAX_ERROR_CHARS else reason[:MAX_ERROR_CHARS] + " ..."
    else:
        reason = f"the command failed ({text.rpartition(chr(10))[2].strip()})"
    return reminder_block(
        "tool-failed",
        f"The call to {name} (id {result.get('tool_call_id', '?')}) did NOT succeed: {reason}. "
        "Do not assume its effects happened; fix the cause, then retry or take another way.",
    )


def _todo_reminder(call: ToolCall, results: Sequence[Message]) -> Reminder | None:
    for result in results:
        if result["role"] == "tool" and result.get("tool_call_id") == call["id"]:
            if is_tool_failure(result):
                return None
            break
    else:
        return None
    try:
        todos = json.loads(call["function"]["arguments"])["todos"]
        lines = [f"- [{item['status']}] {item['content']}" for item in todos]
    except (ValueError, KeyError, TypeError):
        return None
    body = "\n".join(lines) if lines else "(empty)"
    return reminder_block(
        "todo-changed",
        "Your todo list changed. It is now:\n"
        f"{body}\nKeep it current: mark items in_progress when you start them and completed when done.",
    )


def add_reminders(
    messages: Sequence[Message], config: ContextConfig, inputs: ContextInputs
) -> tuple[list[Message], tuple[Reminder, ...]]:
    """The history with the tail's missing reminders placed at its end, and the reminders added.

    Nothing is added while the history ends with the model's reply: nothing has happened since, and a
    message after an unanswered tool call would separate the call from its results.
    """
    if messages and messages[-1]["role"] == "assistant":
        return list(messages), ()
    start = tail_start(messages)
    present = "\n".join(message_text(m) for m in messages[start:] if m["role"] != "tool")
    new = tuple(r for r in dict.fromkeys(tail_reminders(messages, config, inputs)) if r.text not in present)
    if not new:
        return list(messages), ()
    blocks = "\n".join(r.text for r in new)
    result = list(messages)
    last = result[-1] if result else None
    if last is not None and last["role"] == "user":
        result[-1] = _append_text(last, blocks)
    else:
        result.append({"role": "user", "content": blocks})
    return result, new


def _append_text(message: Message, text: str) -> Message:
    content = message.get("content")
    updated: Message = dict(message)  # type: ignore[assignment]
    if isinstance(content, list):
        updated["content"] = [*content, {"type": "text", "text": text}]
    else:
        updated["content"] = f"{content}\n\n{text}" if content else text
    return updated
