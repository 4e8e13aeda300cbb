"""What an agent (and each of its sub-agents) runs with: model, executor, people, hooks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from iflow.agent.approval import ApprovalMode, Approver, deny_all
from iflow.executors.base import Executor
from iflow.llm import LLMClient, Usage
from iflow.todos import TodoStore
from iflow.tools.base import ToolResult
from iflow.types import ContextConfig


class TerminationReason(StrEnum):
    COMPLETED = "completed"  # the model answered without calling a tool
    MAX_TURNS = "max_turns"
    MAX_TOKENS = "max_tokens"
    MAX_TIME = "max_time"
    INTERRUPTED = "interrupted"  # Ctrl-C
    LLM_ERROR = "llm_error"  # the model endpoint failed after retries


class AgentConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_turns: int = Field(default=100, ge=1, description="LLM calls per run (one user prompt)")
    max_tokens: int | None = Field(default=None, ge=1, description="prompt + completion tokens per run")
    max_time_s: float | None = Field(default=None, ge=0, description="wall time per run, seconds")
    approval_mode: ApprovalMode = Field(
        default=ApprovalMode.DEFAULT,
        description="default asks before shell and writes; auto-edit allows writes; yolo allows all; plan is "
        "read-only",
    )
    shell_timeout_s: float = Field(default=120.0, gt=0, description="default run_shell_command timeout")
    subagent_max_turns: int = Field(default=25, ge=1, description="LLM calls a task sub-agent may make")
    context: ContextConfig = Field(
        default_factory=ContextConfig, description="context-engineering thresholds"
    )
    environment_date: str | None = Field(
        default=None, description="the date the environment reminder states (default: today's)"
    )
    environment_os: str | None = Field(
        default=None, description="the OS the environment reminder states (default: the executor's)"
    )


@dataclass
class RunResult:
    termination: TerminationReason
    rounds: int
    usage: Usage
    elapsed_s: float
    final_text: str = ""
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "termination_reason": self.termination.value,
            "rounds": self.rounds,
            "usage": self.usage.to_dict(),
            "time_s": round(self.elapsed_s, 3),
            "final_text": self.final_text,
            "error": self.error,
        }


class AgentEvents:
    """What people see of a run. The defaults show nothing; the CLI overrides them."""

    def on_text(self, text: str) -> None:
        """Part of the model's answer, as it streams."""

    def on_reply_end(self) -> None:
        """The model's reply is complete."""

    def on_tool_call(self, tool: str, description: str) -> None:
        """A tool call is about to be checked and run."""

    def on_tool_result(self, tool: str, result: ToolResult) -> None:
        """A tool call finished (or was refused)."""

    def on_notice(self, text: str) -> None:
        """Something worth a line: compression, a loop warning, a denied call."""


class SubagentEvents(AgentEvents):
    """A sub-agent's events as the user sees them: its tool calls, marked, but not its streamed text."""

    def __init__(self, parent: AgentEvents, name: str) -> None:
        self.parent = parent
        self.name = name

    def on_tool_call(self, tool: str, description: str) -> None:
        self.parent.on_tool_call(tool, f"[{self.name}] {description}")

    def on_tool_result(self, tool: str, result: ToolResult) -> None:
        self.parent.on_tool_result(tool, result)

    def on_notice(self, text: str) -> None:
        self.parent.on_notice(f"[{self.name}] {text}")


class AgentHooks(Protocol):
    """User hooks around the run (settings ``hooks``); see ``iflow.hooks``."""

    def pre_tool_use(self, tool: str, arguments: dict[str, Any]) -> str | None:
        """None lets the call run; a message blocks it and is shown to the model."""
        ...

    def post_tool_use(self, tool: str, arguments: dict[str, Any], output: str, ok: bool) -> None: ...

    def on_event(self, event: str, payload: dict[str, Any]) -> None:
        """SessionStart, SessionEnd, UserPromptSubmit, Stop: never block."""
        ...


@dataclass(frozen=True)
class SubagentSpec:
    """A sub-agent the ``task`` tool can start (built in, or from ``.iflow/agents/*.md``)."""

    name: str
    description: str
    system_prompt: str
    tools: tuple[str, ...] | None = None  # None: every tool but task
    max_turns: int | None = None


@dataclass
class AgentRuntime:
    llm: LLMClient
    executor: Executor
    todos: TodoStore
    save_memory: Callable[[str], str]
    approver: Approver = deny_all
    events: AgentEvents = field(default_factory=AgentEvents)
    hooks: AgentHooks | None = None
    subagents: dict[str, SubagentSpec] = field(default_factory=dict)
