"""The `iflow` agent in a trial: iFlow's agent loop on the host, its tools in the trial's ROCK sandbox."""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path
from typing import Any

from iflow.agent import ApprovalMode, TerminationReason
from iflow.agent.build import AgentOptions, AgentParts, build_agent, llm_config
from iflow.agent.runtime import AgentConfig, AgentEvents
from iflow.executors.rock import RockExecutor
from iflow.llm import LLMClient
from iflow.settings import load_settings
from iflow.todos import TodoStore
from rome.bench.agents import AgentOutcome, CommandRecord
from rome.terminal_tasks.sandbox import TrialSandbox
from rome.terminal_tasks.task import Task

LOG_CAP = 200_000
DEADLINE_GRACE_SEC = 5.0


def resolve_endpoint(model: str | None) -> tuple[str | None, str | None]:
    """`--model` is a model name (endpoint from iFlow's settings) or an OpenAI-compatible base URL.

    For a URL the model name is the first one its `/models` lists (a `roll serve` server lists its model).
    """
    if model is None or not model.startswith(("http://", "https://")):
        return None, model
    import httpx

    base_url = model.rstrip("/")
    if not base_url.endswith("/v1"):
        base_url += "/v1"
    try:
        listed = httpx.get(f"{base_url}/models", timeout=10).json().get("data", [])
    except (httpx.HTTPError, ValueError) as exc:
        raise RuntimeError(f"cannot list the models of {base_url} ({exc}); is the endpoint up?") from exc
    if not listed:
        raise RuntimeError(f"{base_url}/models lists no model; pass --model NAME with IFLOW_baseUrl set")
    return base_url, listed[0]["id"]


class _Recorder(AgentEvents):
    """iFlow's run events as the trial records them: tool calls as commands, the text as the agent log."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.commands: list[CommandRecord] = []

    def on_text(self, text: str) -> None:
        self.log.append(text)

    def on_reply_end(self) -> None:
        self.log.append("\n")

    def on_tool_call(self, tool: str, description: str) -> None:
        self.log.append(f"\n[tool {tool}] {description}\n")
        self.commands.append(
            CommandRecord(
                phase="agent",
                command=f"{tool}: {description}",
                exit_code=None,
                duration_sec=0.0,
                timed_out=False,
            )
        )

    def on_tool_result(self, tool: str, result: Any) -> None:
        self.log.append(f"[{tool} {'ok' if result.ok else 'failed'}] {result.output[-2000:]}\n")

    def on_notice(self, text: str) -> None:
        self.log.append(f"[notice] {text}\n")

    def text(self) -> str:
        joined = "".join(self.log)
        return joined if len(joined) <= LOG_CAP else joined[-LOG_CAP:]


class IflowAgent:
    name = "iflow"

    def __init__(self, model: str | None = None) -> None:
        self.base_url, self.model = resolve_endpoint(model)

    def run(self, sandbox: TrialSandbox, task: Task, timeout: float) -> AgentOutcome:
        from rock.sdk import Sandbox

        # The trial hands agents a view of the sandbox; a ROCK one exposes its `rock` handle through it.
        if not isinstance(getattr(sandbox, "rock", None), Sandbox):
            return AgentOutcome(error="the iflow agent runs its tools through ROCK: use --sandbox rock")
        recorder = _Recorder()
        # Settings come from an empty folder: the host's project memory and hooks must not leak in.
        cwd = Path(tempfile.mkdtemp(prefix="rome-iflow-"))
        options = AgentOptions(
            cwd=cwd, base_url=self.base_url, model=self.model, approval_mode=ApprovalMode.YOLO
        )
        settings = load_settings(cwd)
        llm = LLMClient(llm_config(settings, options))
        executor = RockExecutor(sandbox.rock, workdir=sandbox.workdir)
        config = AgentConfig(approval_mode=ApprovalMode.YOLO, context=settings.context, max_time_s=timeout)
        parts = AgentParts(settings, options, llm, executor, TodoStore(executor.workdir), config)
        agent = build_agent(parts, events=recorder)
        # iFlow checks its time limit between model calls; one long generation can overrun it, so the trial
        # enforces the deadline itself: past it the loop is abandoned, its LLM client and shell closed.
        outcome: list[Any] = []

        def run() -> None:
            try:
                outcome.append(agent.run(task.instruction))
            except (
                Exception
            ) as exc:  # after the deadline this is the abandoned loop failing on closed clients
                outcome.append(exc)

        runner = threading.Thread(target=run, daemon=True)
        runner.start()
        runner.join(timeout + DEADLINE_GRACE_SEC)
        timed_out = runner.is_alive()
        agent.close()
        llm.close()
        if timed_out:
            return AgentOutcome(
                timed_out=True, log=recorder.text(), commands=recorder.commands, messages=list(agent.messages)
            )
        result = outcome[0]
        if isinstance(result, Exception):
            raise result
        log = (
            recorder.text()
            + f"\n[iflow] {result.termination.value}: {result.rounds} rounds, "
            + (f"{result.usage.total_tokens} tokens, {result.elapsed_s:.1f} s")
        )
        error = None
        if result.termination not in (TerminationReason.COMPLETED, TerminationReason.MAX_TIME):
            error = f"iflow stopped: {result.termination.value}" + (
                f" ({result.error})" if result.error else ""
            )
        return AgentOutcome(
            timed_out=result.termination is TerminationReason.MAX_TIME,
            error=error,
            log=log,
            commands=recorder.commands,
            messages=list(agent.messages),
        )
