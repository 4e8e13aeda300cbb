"""The iflow agent for agent-native rollouts: host side, tools in the task's ROCK sandbox, and optionally a
prefix of expert steps already taken (initialized resampling).

With `start = k > 0`, the first k expert steps are replayed: each shell command runs through iflow's own
shell tool in the agent's session (so the sandbox holds their effects and the tool results read exactly as
the agent's own would), their messages follow the instruction in the history, and the policy is asked to
continue (`CONTINUE_PROMPT`).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from iflow.agent import ApprovalMode, TerminationReason
from iflow.agent.build import AgentOptions, AgentParts, build_agent, llm_config, system_prompt
from iflow.agent.runtime import AgentConfig
from iflow.executors.rock import RockExecutor
from iflow.llm import LLMClient
from iflow.settings import load_settings
from iflow.todos import TodoStore
from iflow.tools.base import ToolContext
from iflow.tools.shell import RunShellCommand
from roll.rollout.agentic.expert import ExpertStep
from rome.bench.agents import AgentOutcome
from rome.bench.sandbox import TrialSandbox
from rome.bench.tasks import Task

CONTINUE_PROMPT = "Continue the task from where the steps above left off."


class ResampledIflowAgent:
    """A rome-bench `Agent`: iflow against `base_url`, starting after `expert[:start]`."""

    name = "iflow"

    def __init__(
        self,
        base_url: str,
        model: str,
        expert: list[ExpertStep] | None = None,
        start: int = 0,
        max_turns: int = 20,
    ) -> None:
        expert = expert or []
        if not 0 <= start <= len(expert):
            raise ValueError(f"start {start} is outside 0..{len(expert)} (the expert trajectory's length)")
        self.base_url, self.model = base_url, model
        self.prefix = expert[:start]
        self.max_turns = max_turns

    def run(self, sandbox: TrialSandbox, task: Task, timeout: float) -> AgentOutcome:
        from rome.bench.rock_sandbox import RockSandbox

        if not isinstance(sandbox, RockSandbox):
            return AgentOutcome(error="agent-native rollouts run their tools through ROCK sandboxes")
        cwd = Path(tempfile.mkdtemp(prefix="ale-agentic-"))  # no host memory or hooks leak in
        try:
            options = AgentOptions(
                cwd=cwd, base_url=self.base_url, model=self.model, approval_mode=ApprovalMode.YOLO
            )
            settings = load_settings(cwd)
            llm = LLMClient(llm_config(settings, options))
            executor = RockExecutor(sandbox.rock, workdir=sandbox.workdir)
            config = AgentConfig(
                approval_mode=ApprovalMode.YOLO,
                context=settings.context,
                max_time_s=timeout,
                max_turns=self.max_turns,
            )
            parts = AgentParts(settings, options, llm, executor, TodoStore(executor.workdir), config)
            agent = build_agent(parts)
            prompt = task.instruction
            if self.prefix:
                agent.messages = [
                    {"role": "system", "content": system_prompt(cwd, ApprovalMode.YOLO)},
                    {"role": "user", "content": task.instruction},
                    *self._replay(parts),
                ]
                prompt = CONTINUE_PROMPT
            try:
                result = agent.run(prompt)
            finally:
                agent.close()
                llm.close()
        finally:
            shutil.rmtree(cwd, ignore_errors=True)
        log = f"[iflow] start {len(self.prefix)}: {result.termination.value}, {result.rounds} rounds"
        error = None
        if result.termination not in (TerminationReason.COMPLETED, TerminationReason.MAX_TURNS):
            error = f"iflow stopped: {result.termination.value}" + (
                f" ({result.error})" if result.error else ""
            )
        return AgentOutcome(timed_out=result.termination is TerminationReason.MAX_TIME, error=error, log=log)

    def _replay(self, parts: AgentParts) -> list[dict[str, Any]]:
        shell = RunShellCommand()
        context = ToolContext(
            executor=parts.executor,
            todos=parts.todos,
            save_memory=lambda fact: "memory is off while replaying expert steps",
            shell_timeout_s=parts.config.shell_timeout_s,
        )
        messages: list[dict[str, Any]] = []
        for index, step in enumerate(self.prefix):
            call_id = f"expert_{index}"
            message = step.assistant_message(call_id)
            messages.append(message)
            if step.command is not None:
                arguments = json.loads(message["tool_calls"][0]["function"]["arguments"])
                result = shell.run(arguments, context)
                messages.append({"role": "tool", "tool_call_id": call_id, "content": result.output})
        return messages
