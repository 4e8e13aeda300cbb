"""Helpers shared by the agent tests: an agent on the local executor talking to a scripted model."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iflow.agent import Agent, AgentConfig, AgentEvents, AgentRuntime, ApprovalMode, ApprovalRequest, Decision
from iflow.agent.prompts import GENERAL_PURPOSE, main_system_prompt
from iflow.executors.base import Executor
from iflow.executors.local import LocalExecutor
from iflow.llm import LLMClient, LLMConfig
from iflow.testing import ScriptedOpenAIServer
from iflow.todos import TodoStore
from iflow.tools import ToolResult, all_tools


@dataclass
class RecordingApprover:
    """Answers approval requests from a fixed list of decisions and records what it was asked."""

    answers: list[Decision] = field(default_factory=list)
    asked: list[ApprovalRequest] = field(default_factory=list)

    def __call__(self, request: ApprovalRequest) -> Decision:
        self.asked.append(request)
        return self.answers.pop(0) if self.answers else Decision.DENY


class RecordingEvents(AgentEvents):
    def __init__(self) -> None:
        self.text: list[str] = []
        self.tools: list[tuple[str, ToolResult]] = []
        self.notices: list[str] = []

    def on_text(self, text: str) -> None:
        self.text.append(text)

    def on_tool_result(self, tool: str, result: ToolResult) -> None:
        self.tools.append((tool, result))

    def on_notice(self, text: str) -> None:
        self.notices.append(text)


def make_agent(
    server: ScriptedOpenAIServer,
    repo: Path,
    approver: Any = None,
    tool_format: str = "native",
    executor: Executor | None = None,
    **config: Any,
) -> tuple[Agent, RecordingEvents]:
    config.setdefault("approval_mode", ApprovalMode.YOLO)
    events = RecordingEvents()
    llm = LLMClient(
        LLMConfig(
            base_url=server.url, model="scripted-model", backoff_s=0.0, max_retries=0, tool_format=tool_format
        )
    )  # type: ignore[arg-type]
    executor = executor or LocalExecutor(repo)
    runtime = AgentRuntime(
        llm=llm,
        executor=executor,
        todos=TodoStore(str(repo)),
        save_memory=lambda fact: "test memory",
        approver=approver or RecordingApprover(),
        events=events,
        subagents={GENERAL_PURPOSE.name: GENERAL_PURPOSE},
    )
    agent_config = AgentConfig(**config)
    agent = Agent(runtime, all_tools(), main_system_prompt(agent_config.approval_mode, ""), agent_config)
    return agent, events


def tool_names(request: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in request.get("tools", [])]


def last_tool_result(request: dict[str, Any]) -> str:
    return next(m["content"] for m in reversed(request["messages"]) if m["role"] == "tool")
