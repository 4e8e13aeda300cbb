"""`prepare`: the one call the agent (and the model proxy) makes before each LLM call."""

from __future__ import annotations

from collections.abc import Sequence

from iflow.context.compress import light_pass, summary_request_from_counts, threshold_tokens
from iflow.context.reminders import add_reminders
from iflow.context.tokens import CharEstimateCounter, TokenCounter, count_tokens
from iflow.types import (
    CompressionReport,
    CompressionTier,
    ContextConfig,
    ContextInputs,
    ContextState,
    Message,
    PreparedContext,
)

NO_INPUTS = ContextInputs()


def prepare(
    messages: Sequence[Message],
    state: ContextState | None = None,
    config: ContextConfig | None = None,
    *,
    inputs: ContextInputs = NO_INPUTS,
    counter: TokenCounter | None = None,
    force_summary: bool = False,
    reserved_tokens: int = 0,
) -> PreparedContext:
    """Reminders, token accounting and compression for `messages`; see the package docstring.

    - `reserved_tokens` is what the request needs besides the messages (the tool schemas, see
      `tool_schema_tokens`, and room for the reply); it counts against the window with the messages.
    - The light pass runs when the history (reminders included) plus `reserved_tokens` takes at least
      `threshold_tokens(config.light_threshold, window)` tokens.
    - A `SummaryRequest` is returned when, after the light pass, they still take at least
      `threshold_tokens(config.summary_threshold, window)` tokens, or when `force_summary` is set
      (None even then if everything but the system messages is among the messages that must stay).
    - `inputs.modified_files` should name each outside change once: it is reported at the next call only.
    """
    config = config if config is not None else ContextConfig()
    counter = counter if counter is not None else CharEstimateCounter()
    window = config.context_window
    if reserved_tokens < 0:
        raise ValueError(f"reserved_tokens must be >= 0, got {reserved_tokens}")

    history, reminders = add_reminders(messages, config, inputs)
    counts, state = count_tokens(history, counter, state)
    tokens_before = sum(counts)
    tier: CompressionTier = "none"
    dropped = elided = 0
    if tokens_before + reserved_tokens >= threshold_tokens(config.light_threshold, window):
        lighter, dropped, elided = light_pass(history, config)
        if dropped or elided:
            tier = "light"
            history = lighter
            counts, state = count_tokens(history, counter, state)
    tokens = sum(counts)

    summary_request = None
    if force_summary or tokens + reserved_tokens >= threshold_tokens(config.summary_threshold, window):
        summary_request = summary_request_from_counts(history, counts, config)
    return PreparedContext(
        messages=history,
        state=state,
        tokens=tokens,
        window=window,
        reserved_tokens=reserved_tokens,
        reminders=reminders,
        compression=CompressionReport(tier, tokens_before, tokens, dropped, elided),
        summary_request=summary_request,
    )
