"""Execution replay: a kept trajectory's tool calls run again, with iFlow's own tools, in a fresh sandbox of
its task; the trajectory stays only if the task's tests pass afterwards."""

from __future__ import annotations

from typing import Any

from iflow.executors.rock import RockExecutor
from iflow.todos import TodoStore
from iflow.tools import ToolContext, ToolError, all_tools
from iflow.tools.base import ToolKind
from rome.bench.agents import AgentOutcome, CommandRecord
from rome.data.types import tool_steps
from rome.terminal_tasks.sandbox import TrialSandbox
from rome.terminal_tasks.task import Task


class ReplayAgent:
    """A rome-bench `Agent` that re-runs the recorded tool calls in order (meta tools are skipped: they
    change nothing in the sandbox)."""

    name = "replay"

    def __init__(self, messages: list[dict[str, Any]]) -> None:
        self.steps = tool_steps(messages)

    def run(self, sandbox: TrialSandbox, task: Task, timeout: float) -> AgentOutcome:
        from rock.sdk import Sandbox

        # The trial hands agents a view of the sandbox; a ROCK one exposes its `rock` handle through it.
        if not isinstance(getattr(sandbox, "rock", None), Sandbox):
            return AgentOutcome(error="replay runs iFlow's tools through ROCK sandboxes")
        executor = RockExecutor(sandbox.rock, workdir=sandbox.workdir)
        tools = {tool.name: tool for tool in all_tools()}
        context = ToolContext(
            executor=executor,
            todos=TodoStore(executor.workdir),
            save_memory=lambda fact: "memory is off during replay",
        )
        commands: list[CommandRecord] = []
        log: list[str] = []
        try:
            for step in self.steps:
                tool = tools.get(step.tool)
                if tool is None or tool.kind is ToolKind.META or step.arguments is None:
                    continue
                arguments = dict(step.arguments)
                try:
                    tool.check_arguments(arguments)
                    result = tool.run(arguments, context)
                    output, ok = result.output, result.ok
                except ToolError as error:
                    output, ok = f"Error: {error}", False
                log.append(f"[{step.tool}] {'ok' if ok else 'failed'}: {output[-200:]}")
                record = CommandRecord(
                    phase="agent",
                    command=step.command or step.tool,
                    exit_code=0 if ok else 1,
                    duration_sec=0.0,
                    timed_out=False,
                )
                commands.append(record)
        finally:
            executor.close()
        return AgentOutcome(log="\n".join(log), commands=commands)
