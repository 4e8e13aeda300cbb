"""Data types shared by the iFlow agent, its context engineering and the model proxy.

Messages are plain OpenAI chat-completion dicts (JSON in, JSON out), typed here as TypedDicts so the agent,
`iflow.context` and `rock.proxy` pass the same objects without conversion.

Conventions the agent's tools follow so `iflow.context` can read outcomes from the messages alone (the proxy
sees nothing else):
- a failed tool call's result content starts with ``TOOL_ERROR_PREFIX`` (``"Error: "``);
- a shell command's result ends with a line ``Exit code: N`` (``EXIT_CODE_PATTERN``); N != 0 is a failure;
- ``todo_write`` takes ``{"todos": [TodoItem, ...]}`` (the whole list, replacing the previous one);
- write tools name their file in one of ``ContextConfig.path_argument_keys`` (``file_path`` first).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal, NotRequired, Required

from pydantic import BaseModel, ConfigDict, Field, model_validator

# typing_extensions' TypedDict: pydantic models hold these messages (roll's AssistantOutput), and pydantic
# accepts only this one on Python < 3.12.
from typing_extensions import TypedDict

Role = Literal["system", "user", "assistant", "tool"]
# What the model is shown of iFlow itself: "full" (every tool, with full descriptions, and the full working
# instructions) or "compact" (shell, read, write and replace with one-line descriptions and a short prompt,
# for small models whose context and prefill time are scarce) or "shell" (the compact prompt with the shell
# as the only tool: the least a terminal task needs, for the smallest models). See iflow.agent.prompts,
# iflow.tools.tools_for.
PromptProfile = Literal["full", "compact", "shell"]

TOOL_ERROR_PREFIX = "Error: "
EXIT_CODE_PATTERN = re.compile(r"Exit code: (-?\d+)")
REMINDER_OPEN = "<system-reminder>"


def tool_result_failed(content: str | None) -> bool:
    """Whether a tool result says its call failed, by iFlow's conventions: a failed call's result starts
    with 'Error: '; a shell result ends with 'Exit code: N', N non-zero on failure; no result at all is a
    call that never finished."""
    if content is None or content.startswith(TOOL_ERROR_PREFIX):
        return True
    codes = EXIT_CODE_PATTERN.findall(content)
    return bool(codes) and codes[-1] != "0"


REMINDER_CLOSE = "</system-reminder>"


class FunctionCall(TypedDict):
    name: str
    arguments: str  # JSON text, exactly as the model produced it


class ToolCall(TypedDict):
    id: str
    type: Literal["function"]
    function: FunctionCall


class TextPart(TypedDict):
    type: Literal["text"]
    text: str


class Message(TypedDict, total=False):
    """One OpenAI chat message. `content` is a string, a list of content parts, or None (tool-call turns)."""

    role: Required[Role]
    content: str | list[TextPart] | None
    tool_calls: NotRequired[list[ToolCall]]
    tool_call_id: NotRequired[str]
    name: NotRequired[str]


class TodoItem(TypedDict):
    id: str
    content: str
    status: Literal["pending", "in_progress", "completed"]


ReminderKind = Literal["environment", "file-modified", "tool-failed", "todo-changed", "loop-detected"]


@dataclass(frozen=True)
class Reminder:
    """One `<system-reminder>` block added to the history: `text` is the whole block, tags included."""

    kind: ReminderKind
    text: str


@dataclass(frozen=True)
class EnvironmentSnapshot:
    """What the agent saw of its environment at session start (gathered by impure code, passed in as data)."""

    cwd: str
    listing: tuple[str, ...]
    git_status: str | None
    tools: tuple[str, ...]
    date: str
    os: str


@dataclass(frozen=True)
class FixedEnvironment:
    """A date and OS for the environment reminder that stay the same on every day and machine."""

    date: str
    os: str


# What training runs, their teacher data and their evaluations tell the agent. With today's date and the
# host's kernel, the same task's prompt changed from one day or machine to the next (so did SFT data collected
# on another day, and a reused evaluation). Deployment (the CLI, rome-bench) states the real ones.
TRAINING_ENVIRONMENT = FixedEnvironment(date="2026-12-06", os="Linux")


@dataclass(frozen=True)
class FileModification:
    """A file changed outside the agent's own tools since the agent last saw it (detected by the caller)."""

    path: str
    detail: str = ""


@dataclass(frozen=True)
class ContextInputs:
    """Facts from outside the message list for one `prepare` call; empty inputs are the proxy's case."""

    environment: EnvironmentSnapshot | None = None
    modified_files: tuple[FileModification, ...] = ()


class ContextConfig(BaseModel):
    """Context-engineering settings (also the `context` section of settings.json)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    context_window: int = Field(128_000, gt=0, alias="contextWindow", description="model window in tokens")
    light_threshold: float = Field(
        0.6,
        gt=0,
        le=1,
        alias="lightThreshold",
        description="fraction of the window that starts the light pass",
    )
    summary_threshold: float = Field(
        0.8,
        gt=0,
        le=1,
        alias="summaryThreshold",
        description="fraction of the window that asks for a summary",
    )
    keep_recent_messages: int = Field(
        10, ge=1, alias="keepRecentMessages", description="last N messages kept verbatim by both tiers"
    )
    recent_token_ratio: float = Field(
        0.3,
        gt=0,
        le=1,
        alias="recentTokenRatio",
        description="most of the window the kept recent messages may take after a summary",
    )
    touched_files_token_ratio: float = Field(
        0.1,
        ge=0,
        le=1,
        alias="touchedFilesTokenRatio",
        description="most of the window the re-attached recently touched files may take after a summary",
    )
    loop_threshold: int = Field(
        5, ge=2, alias="loopThreshold", description="identical consecutive tool calls that count as a loop"
    )
    chunk_chars: int = Field(
        50, ge=8, alias="chunkChars", description="chunk size for repeated-output detection"
    )
    chunk_repeats: int = Field(
        10, ge=2, alias="chunkRepeats", description="repeats of one chunk in a reply that count as a loop"
    )
    read_only_tools: tuple[str, ...] = Field(
        ("read_file", "list_directory", "glob", "search_file_content", "todo_read"),
        alias="readOnlyTools",
        description="tools that change nothing: the light pass drops an earlier identical call, result too",
    )
    write_tools: tuple[str, ...] = Field(
        ("write_file", "replace", "multi_edit"),
        alias="writeTools",
        description="tools that write a file: the light pass shortens the arguments of their older calls",
    )
    file_tools: tuple[str, ...] = Field(
        ("read_file", "write_file", "replace", "multi_edit"),
        alias="fileTools",
        description="tools whose file argument makes a file 'recently touched' (re-attached after a summary)",
    )
    path_argument_keys: tuple[str, ...] = Field(
        ("file_path", "path", "absolute_path"),
        alias="pathArgumentKeys",
        description="argument names a file tool gives its file in, first match wins",
    )

    @model_validator(mode="after")
    def _thresholds_ordered(self) -> ContextConfig:
        if self.light_threshold > self.summary_threshold:
            raise ValueError(
                f"context.lightThreshold ({self.light_threshold}) must not exceed context.summaryThreshold "
                f"({self.summary_threshold}); lower the first or raise the second"
            )
        return self


CompressionTier = Literal["none", "light", "summary"]


@dataclass(frozen=True)
class CompressionReport:
    """What compression did in one `prepare` call (or in `apply_summary`)."""

    tier: CompressionTier
    tokens_before: int
    tokens_after: int
    dropped_tool_calls: int = 0
    elided_write_arguments: int = 0
    summarized_messages: int = 0


@dataclass(frozen=True)
class SummaryRequest:
    """A full-summary LLM call for the caller to make: send `messages`, pass the reply to `apply_summary`.

    `head` are the leading system messages kept as they are, `summarized` the messages the summary replaces,
    `recent` the last messages kept verbatim (never starting inside a tool call's results), `touched_files`
    the files those summarized messages read or wrote, most recent first (the caller may read their current
    contents and hand them to `apply_summary`).
    """

    messages: tuple[Message, ...]
    head: tuple[Message, ...]
    summarized: tuple[Message, ...]
    recent: tuple[Message, ...]
    touched_files: tuple[str, ...]


@dataclass(frozen=True)
class ContextState:
    """Incremental bookkeeping carried from one `prepare` call to the next; a cache only.

    `prepare` gives the same messages for a carried state and for `ContextState()`: the state just lets it
    skip recounting messages it has already counted.
    """

    counter_name: str = ""
    counts_by_identity: dict[int, tuple[Message, int]] = field(default_factory=dict)
    counts_by_content: dict[tuple[object, ...], int] = field(default_factory=dict)


@dataclass(frozen=True)
class PreparedContext:
    """The result of `iflow.context.prepare`: what to send now and what happened on the way."""

    messages: list[Message]
    state: ContextState
    tokens: int  # of the prepared messages
    window: int
    reserved_tokens: int  # besides the messages: tool schemas, room for the reply
    reminders: tuple[Reminder, ...]
    compression: CompressionReport
    summary_request: SummaryRequest | None

    @property
    def usage(self) -> float:
        """Fraction of the window the prepared messages and the reserved tokens take."""
        return (self.tokens + self.reserved_tokens) / self.window
