"""Does a train-mode call continue its episode's context? Pure functions on OpenAI chat messages.

Code in a sandbox can reach the proxy's chat route as the agent does. A call becomes a chunk of the episode
only when it is the next step of the one conversation the episode has recorded so far. With `old` the
messages the agent sent for the last recorded chunk followed by that chunk's answer, a new call continues the
context when its messages are one of:

1. **extension**: `old` followed by new messages (tool results, a user turn, reminders);
2. **light pass** (iflow's compression without an LLM): `old` with some read-only tool calls dropped together
   with their results and some write calls' arguments reduced to their file path, then new messages;
3. **after a summary**: the same leading system messages, one user message that begins with iflow's summary
   intro and carries a summary this proxy answered for the episode since the last chunk, then a tail that
   picks up `old` somewhere after its system messages (and new messages after it).

The answer is matched leniently, as the agent re-serializes it: the same text once `<tool_call>` blocks are
taken out, the same number of tool calls with the same names and arguments (ids may differ: the agent names
calls it parsed from text itself). A summary call (iflow's summary prompt and a transcript) is answered but
never recorded, and only one is allowed between two chunks. The first call of an episode fixes its root.

iflow's sub-agents (its `task` tool) talk to the model with a context of their own: a call that continues no
thread of the episode may open a new one when it is the first call of a sub-agent for a `task` call the
model just made (its user message begins with that call's prompt; its tools are among the episode's), once
per such call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from iflow.context import ContextConfig, message_text
from iflow.context.compress import SUMMARY_INTRO, SUMMARY_PROMPT

Message = dict[str, Any]

TOOL_CALL_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


def is_summary_request(messages: Sequence[Message]) -> bool:
    """iflow's summary call: its summary prompt as the system message and a transcript as the user's."""
    return (
        len(messages) == 2
        and messages[0].get("role") == "system"
        and message_text(messages[0]) == SUMMARY_PROMPT
        and messages[1].get("role") == "user"
        and message_text(messages[1]).startswith("<transcript>")
    )


def subagent_prompts(answer: Message) -> list[str]:
    """The prompts of an answer's `task` calls (iflow's sub-agents), native or as `<tool_call>` text."""
    calls = [(_name(call), _arguments(call)) for call in answer.get("tool_calls") or []]
    for block in TOOL_CALL_BLOCK.findall(message_text(answer)):
        try:
            payload = json.loads(block)
        except ValueError:
            continue
        if isinstance(payload, dict):
            raw = payload.get("arguments", {})
            calls.append((payload.get("name"), _parse(raw) if isinstance(raw, str) else raw))
    return [
        arguments["prompt"]
        for name, arguments in calls
        if name == "task" and isinstance(arguments, dict) and isinstance(arguments.get("prompt"), str)
    ]


def opens_subagent(prompt: str, messages: Sequence[Message]) -> bool:
    """`messages` are a sub-agent's first call for `prompt`: its system messages, then one user message that
    begins with the prompt (iflow may append reminders to it), nothing else."""
    head = _head_end(messages)
    return (
        len(messages) == head + 1
        and head >= 1
        and messages[head].get("role") == "user"
        and message_text(messages[head]).startswith(prompt)
        and bool(prompt.strip())
    )


def continuation_error(
    previous: Sequence[Message],
    answer: Message,
    messages: Sequence[Message],
    summaries: Sequence[str],
    config: ContextConfig,
) -> str | None:
    """None when `messages` continue `previous` + `answer` (see the module docstring), else why not."""
    old = [*previous, answer]
    if _match_from(old, messages, config) is not None:
        return None
    head = _head_end(old)
    if (
        len(messages) > head + 1
        and all(_same(a, b) for a, b in zip(old[:head], messages[:head], strict=False))
        and _head_end(messages) == head
    ):
        summary = messages[head]
        text = message_text(summary)
        if summary.get("role") == "user" and text.startswith(SUMMARY_INTRO):
            if not any(f"<summary>\n{known.strip()}\n</summary>" in text for known in summaries):
                return "its summary is not one the proxy produced for this episode"
            tail = messages[head + 1 :]
            for start in range(head, len(old)):
                picks_up = start == len(old) - 1 or _same(old[start], tail[0])
                if picks_up and _match_from(old[start:], tail, config) is not None:
                    return None
            return "the messages after its summary do not pick up the episode's last context"
    return "its messages do not continue the episode's last call and answer (nor compress them as iflow does)"


def _head_end(messages: Sequence[Message]) -> int:
    end = 0
    while end < len(messages) and messages[end].get("role") == "system":
        end += 1
    return end


def _match_from(old: Sequence[Message], new: Sequence[Message], config: ContextConfig) -> int | None:
    """Where the new messages start in `new` if it begins with `old` (the last of which is the engine's
    answer) as iflow's light pass may have left it; None when it does not."""
    read_only = set(config.read_only_tools)
    write = set(config.write_tools)
    dropped: set[str] = set()
    j = 0
    for i, message in enumerate(old):
        last = i == len(old) - 1
        if message.get("role") == "tool" and message.get("tool_call_id") in dropped:
            continue  # the result of a call the light pass dropped
        if j < len(new) and (_answer_matches(new[j], message) if last else _same(message, new[j])):
            j += 1
            continue
        if last or message.get("role") != "assistant" or not message.get("tool_calls"):
            return None
        kept = _lightened(message, new[j] if j < len(new) else None, read_only, write)
        if kept is None:
            return None
        dropped |= kept[0]
        j += kept[1]
    return j


def _lightened(
    message: Message, candidate: Message | None, read_only: set[str], write: set[str]
) -> tuple[set[str], int] | None:
    """The calls the light pass dropped from `message`, and 1 when `candidate` is what it left of it or 0
    when it left nothing; None when neither is so."""
    calls = message.get("tool_calls") or []
    if candidate is not None and candidate.get("role") == "assistant":
        kept = _kept_calls(calls, candidate, message_text(message), read_only, write)
        if kept is not None:
            return kept, 1
    if message_text(message).strip() or not all(_name(call) in read_only for call in calls):
        return None
    return {str(call.get("id")) for call in calls}, 0


def _kept_calls(
    calls: list[Message], candidate: Message, text: str, read_only: set[str], write: set[str]
) -> set[str] | None:
    """The ids of `calls` dropped to give `candidate` (same text, the other calls in order, write calls
    possibly reduced), or None when `candidate` is not that."""
    kept = candidate.get("tool_calls") or []
    if message_text(candidate) != text or not kept:
        return None
    dropped: set[str] = set()
    k = 0
    for call in calls:
        if k < len(kept) and kept[k].get("id") == call.get("id"):
            if not _same_call(call, kept[k]) and not _reduced(call, kept[k], write):
                return None
            k += 1
        elif _name(call) in read_only:
            dropped.add(str(call.get("id")))
        else:
            return None
    return dropped if k == len(kept) else None


def _reduced(call: Message, kept: Message, write: set[str]) -> bool:
    """`kept` is `call` with its arguments reduced to one string-valued key (a write tool's file path)."""
    if _name(call) not in write or _name(kept) != _name(call):
        return False
    original, reduced = _arguments(call), _arguments(kept)
    if not isinstance(original, dict) or not isinstance(reduced, dict) or len(reduced) != 1:
        return False
    ((key, value),) = reduced.items()
    return isinstance(value, str) and original.get(key) == value


def _same(a: Message, b: Message) -> bool:
    """Equal as a chat model sees them: role, text, tool calls, the call a result answers."""
    if a.get("role") != b.get("role") or message_text(a) != message_text(b):
        return False
    if a.get("tool_call_id") != b.get("tool_call_id"):
        return False
    calls_a, calls_b = a.get("tool_calls") or [], b.get("tool_calls") or []
    return len(calls_a) == len(calls_b) and all(
        x.get("id") == y.get("id") and _same_call(x, y) for x, y in zip(calls_a, calls_b, strict=True)
    )


def _answer_matches(sent: Message, answer: Message) -> bool:
    """`sent` is the engine's `answer` as the agent keeps it in its history."""
    if sent.get("role") != "assistant":
        return False
    text = message_text(answer)
    if TOOL_CALL_BLOCK.sub("", text).strip() != TOOL_CALL_BLOCK.sub("", message_text(sent)).strip():
        return False
    expected = [(_name(call), _arguments(call)) for call in answer.get("tool_calls") or []]
    for block in TOOL_CALL_BLOCK.findall(text):
        try:
            payload = json.loads(block)
        except ValueError:
            payload = None
        if isinstance(payload, dict) and isinstance(payload.get("name"), str):
            raw = payload.get("arguments", {})
            expected.append((payload["name"], _parse(raw) if isinstance(raw, str) else raw))
        else:
            expected.append((None, None))
    got = sent.get("tool_calls") or []
    if len(got) != len(expected):
        return False
    for call, (name, arguments) in zip(got, expected, strict=True):
        if name and _name(call) != name:
            return False
        if isinstance(arguments, dict) and _arguments(call) != arguments:
            return False
    return True


def _same_call(a: Message, b: Message) -> bool:
    return _name(a) == _name(b) and _arguments(a) == _arguments(b)


def _name(call: Message) -> str | None:
    function = call.get("function")
    return function.get("name") if isinstance(function, dict) else None


def _arguments(call: Message) -> Any:
    function = call.get("function")
    raw = function.get("arguments") if isinstance(function, dict) else None
    return _parse(raw) if isinstance(raw, str) else raw


def _parse(raw: str) -> Any:
    """JSON arguments parsed (the agent re-serializes them), or the text when it is not JSON."""
    try:
        return json.loads(raw) if raw.strip() else {}
    except ValueError:
        return raw
