"""The iFlow agent: a single-agent control loop over an OpenAI-compatible model."""

from iflow.agent.approval import ApprovalMode, ApprovalRequest, Approver, Decision, deny_all
from iflow.agent.loop import Agent
from iflow.agent.runtime import (
    AgentConfig,
    AgentEvents,
    AgentHooks,
    AgentRuntime,
    RunResult,
    SubagentSpec,
    TerminationReason,
)

__all__ = [
    "Agent",
    "AgentConfig",
    "AgentEvents",
    "AgentHooks",
    "AgentRuntime",
    "ApprovalMode",
    "ApprovalRequest",
    "Approver",
    "Decision",
    "RunResult",
    "SubagentSpec",
    "TerminationReason",
    "deny_all",
]
