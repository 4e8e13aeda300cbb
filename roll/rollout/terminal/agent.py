"""The iflow agent for agent-native rollouts: host side, tools in the task's ROCK sandbox, and optionally a
prefix of expert steps already taken (initialized resampling).

With `start = k > 0`, the first k expert steps are replayed (`roll.rollout.terminal.resampling.prefill`:
through iflow's own shell tool in the agent's session, their messages after the instruction) and the policy
is asked to continue (`CONTINUE_PROMPT`).
"""

from __future__ import annotations

from dataclasses import dataclass

from iflow.agent import TerminationReason
from iflow.agent.build import sandbox_agent
from iflow.llm import ChatEndpoint
from iflow.types import PromptProfile
from roll.rollout.terminal.resampling.expert import ExpertStep
from roll.rollout.terminal.resampling.prefill import CONTINUE_PROMPT, prefilled_history
from rome.terminal_tasks.rock_sandbox import RockSandbox
from rome.terminal_tasks.task import Task

__all__ = ["CONTINUE_PROMPT", "AgentOutcome", "ResampledIflowAgent", "expert_messages"]


@dataclass(frozen=True)
class AgentOutcome:
    """How the agent's run ended: past its time limit, with an error, and its log."""

    timed_out: bool = False
    error: str | None = None
    log: str = ""


def expert_messages(steps: list[ExpertStep]) -> list[dict[str, object]]:
    """The expert steps as the assistant messages of a history (call ids `expert_<index>`)."""
    return [step.assistant_message(f"expert_{index}") for index, step in enumerate(steps)]


class ResampledIflowAgent:
    """iflow against `base_url` (an OpenAI base URL, or the episode's proxy in this process), its tools in
    the sandbox, starting after `expert[:start]`."""

    name = "iflow"

    def __init__(
        self,
        base_url: str | ChatEndpoint,
        model: str,
        expert: list[ExpertStep] | None = None,
        start: int = 0,
        max_turns: int = 20,
        prompt_profile: PromptProfile = "full",
    ) -> None:
        expert = expert or []
        if not 0 <= start <= len(expert):
            raise ValueError(f"start {start} is outside 0..{len(expert)} (the expert trajectory's length)")
        self.base_url, self.model = base_url, model
        self.prefix = expert[:start]
        self.max_turns = max_turns
        self.prompt_profile = prompt_profile

    def run(self, sandbox: RockSandbox, task: Task, timeout: float) -> AgentOutcome:
        with sandbox_agent(
            sandbox.rock,
            sandbox.workdir,
            self.base_url,
            self.model,
            timeout,
            self.max_turns,
            self.prompt_profile,
            tmp_prefix="ale-terminal-",
        ) as (agent, parts):
            prompt = task.instruction
            if self.prefix:
                agent.messages = prefilled_history(parts, task.instruction, expert_messages(self.prefix))
                prompt = CONTINUE_PROMPT
            result = agent.run(prompt)
        log = f"[iflow] start {len(self.prefix)}: {result.termination.value}, {result.rounds} rounds"
        error = None
        if result.termination not in (TerminationReason.COMPLETED, TerminationReason.MAX_TURNS):
            error = f"iflow stopped: {result.termination.value}" + (
                f" ({result.error})" if result.error else ""
            )
        return AgentOutcome(timed_out=result.termination is TerminationReason.MAX_TIME, error=error, log=log)
