"""Agents a trial can run: `oracle` (the task's own solution), `nop` (nothing) and `iflow` (the ALE agent)."""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import BaseModel, Field

from rome.terminal_tasks.sandbox import TrialSandbox
from rome.terminal_tasks.task import SOLUTION_MOUNT, Task

AGENT_NAMES = ("oracle", "nop", "iflow")


class CommandRecord(BaseModel):
    phase: str
    command: str
    exit_code: int | None
    duration_sec: float
    timed_out: bool


class AgentOutcome(BaseModel):
    timed_out: bool = False
    error: str | None = None
    log: str = ""
    commands: list[CommandRecord] = Field(default_factory=list)
    # The agent's chat history (OpenAI messages), for agents that keep one: the trial's ATIF trajectory.
    messages: list[dict[str, Any]] = Field(default_factory=list)


class Agent(Protocol):
    name: str

    def run(self, sandbox: TrialSandbox, task: Task, timeout: float) -> AgentOutcome: ...


class NopAgent:
    """Does nothing: a task whose tests pass untouched is broken."""

    name = "nop"

    def run(self, sandbox: TrialSandbox, task: Task, timeout: float) -> AgentOutcome:
        return AgentOutcome(log="nop agent: no actions taken")


class OracleAgent:
    """Uploads the task's reference solution and runs it; a task it cannot solve is broken."""

    name = "oracle"

    def run(self, sandbox: TrialSandbox, task: Task, timeout: float) -> AgentOutcome:
        if task.solution_command is None:
            return AgentOutcome(error=f"task {task.id} has no solution script; the oracle cannot run it")
        sandbox.upload(task.solution_files, SOLUTION_MOUNT)
        result = sandbox.run(task.solution_command, timeout=timeout)
        record = CommandRecord(
            phase="agent",
            command=task.solution_command,
            exit_code=result.exit_code,
            duration_sec=result.duration_sec,
            timed_out=result.timed_out,
        )
        error = None
        if not result.timed_out and result.exit_code != 0:
            error = f"solution exited with status {result.exit_code}"
        return AgentOutcome(timed_out=result.timed_out, error=error, log=result.output, commands=[record])


def make_agent(name: str, model: str | None = None) -> Agent:
    if name == "oracle":
        return OracleAgent()
    if name == "nop":
        return NopAgent()
    if name == "iflow":
        from rome.bench.iflow_agent import IflowAgent

        return IflowAgent(model=model)
    raise ValueError(f"unknown agent {name!r}; choose one of {', '.join(AGENT_NAMES)}")
