"""The agent of a collection trial: iFlow's own loop on the host, its tools in the trial's ROCK sandbox, its
model at the proxy. It keeps the history and tool schemas it ran with, which become the trajectory."""

from __future__ import annotations

from typing import Any

from iflow.agent import TerminationReason
from iflow.agent.build import sandbox_agent
from iflow.types import TRAINING_ENVIRONMENT, FixedEnvironment, PromptProfile
from rome.bench.agents import AgentOutcome, CommandRecord
from rome.data.types import tool_steps
from rome.terminal_tasks.sandbox import TrialSandbox
from rome.terminal_tasks.task import Task


class CollectingAgent:
    """A rome-bench `Agent` for one trial; after `run`, `messages` and `tools` hold what iFlow did."""

    def __init__(
        self,
        name: str,
        base_url: str,
        model: str,
        max_turns: int,
        prompt_profile: PromptProfile = "full",
        environment: FixedEnvironment = TRAINING_ENVIRONMENT,
    ) -> None:
        self.name = name
        self.base_url, self.model, self.max_turns = base_url, model, max_turns
        self.prompt_profile: PromptProfile = prompt_profile
        self.environment = environment
        self.messages: list[dict[str, Any]] = []
        self.tools: list[dict[str, Any]] = []

    def run(self, sandbox: TrialSandbox, task: Task, timeout: float) -> AgentOutcome:
        from rock.sdk import Sandbox

        # The trial hands agents a view of the sandbox; a ROCK one exposes its `rock` handle through it.
        if not isinstance(getattr(sandbox, "rock", None), Sandbox):
            return AgentOutcome(
                error="collection runs iFlow's tools through ROCK sandboxes: use --sandbox rock"
            )
        with sandbox_agent(
            sandbox.rock,
            sandbox.workdir,
            self.base_url,
            self.model,
            timeout,
            self.max_turns,
            prompt_profile=self.prompt_profile,
            tmp_prefix="rome-data-",
            environment=self.environment,
        ) as (agent, _parts):
            try:
                result = agent.run(task.instruction)
            finally:
                self.messages = [dict(m) for m in agent.messages]
                self.tools = [tool.schema() for tool in agent.tools.values()]
        commands = [
            CommandRecord(
                phase="agent",
                command=step.command or step.raw_arguments,
                exit_code=None,
                duration_sec=0.0,
                timed_out=False,
            )
            for step in tool_steps(self.messages)
        ]
        log = f"[iflow] {result.termination.value}: {result.rounds} rounds"
        error = None
        if result.termination is not TerminationReason.COMPLETED:
            error = f"iflow stopped: {result.termination.value}" + (
                f" ({result.error})" if result.error else ""
            )
        return AgentOutcome(
            timed_out=result.termination is TerminationReason.MAX_TIME,
            error=error,
            log=log,
            commands=commands,
        )
