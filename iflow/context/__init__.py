"""Context engineering for iFlow: pure, deterministic functions on OpenAI chat message lists.

The agent (before every LLM call) and the model proxy (on every request it forwards in training) call the
same entry point, so deployment and training see the same context:

    prepared = prepare(messages, state, config, inputs=ContextInputs(...), counter=counter,
                       reserved_tokens=tool_schema_tokens(tools, counter) + max_reply_tokens)
    messages, state = prepared.messages, prepared.state   # state is a cache: ContextState() gives the same
    if prepared.summary_request:           # usage reached config.summary_threshold (or force_summary=True)
        text = llm(prepared.summary_request.messages)          # the only I/O, made by the caller
        messages, report = apply_summary(prepared.summary_request, text, config, counter, file_contents)
    send(messages)                         # and keep them as the history: reminders and compression stay

The types it works on (`ContextConfig`, `ContextState`, `ContextInputs`) are exported here too, so a caller
outside iflow (the model proxy) needs nothing of iflow but this package.

The proxy sees only messages: it passes `ContextInputs()` (the agent's reminders are already in the
messages it forwards, and `prepare` adds none twice), and must use the agent's `ContextConfig` and token
counter, or its thresholds fall elsewhere.

`prepare` in order: counts tokens (incrementally, with `state`), adds `<system-reminder>` blocks for what
happened since the model's last reply (environment snapshot at session start, files modified outside the
agent, failed tool calls, todo-list changes, loops), runs the light pass when usage >= light_threshold (drops
earlier repeats of identical read-only tool calls with their results, reduces old write/edit arguments to the
file path), and asks for a full summary when usage is still >= summary_threshold.

Nothing here reads files, clocks or the network: the same inputs give the same outputs, and `prepare` is
idempotent (preparing prepared messages again adds nothing).
"""

from iflow.context.compress import apply_summary, build_summary_request, light_pass
from iflow.context.detection import detect_repeated_chunks, detect_tool_loop, is_tool_failure
from iflow.context.prepare import prepare
from iflow.context.reminders import environment_reminder, reminder_block
from iflow.context.tokens import (
    CharEstimateCounter,
    TokenCounter,
    TokenizerCounter,
    count_tokens,
    message_text,
    tool_schema_tokens,
)
from iflow.types import ContextConfig, ContextInputs, ContextState

__all__ = [
    "CharEstimateCounter",
    "ContextConfig",
    "ContextInputs",
    "ContextState",
    "TokenCounter",
    "TokenizerCounter",
    "apply_summary",
    "build_summary_request",
    "count_tokens",
    "detect_repeated_chunks",
    "detect_tool_loop",
    "environment_reminder",
    "is_tool_failure",
    "light_pass",
    "message_text",
    "prepare",
    "reminder_block",
    "tool_schema_tokens",
]
