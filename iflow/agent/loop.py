"""The agent loop: prepare context, ask the model, run its tool calls, until it answers or a limit ends it."""

from __future__ import annotations

import dataclasses
import platform
import time
from datetime import date
from typing import Any

from iflow.agent.approval import (
    INTERACTIVE_DENIAL,
    NON_INTERACTIVE_DENIAL,
    PLAN_REFUSAL,
    ApprovalRequest,
    Decision,
    deny_all,
    is_refused,
    needs_approval,
)
from iflow.agent.runtime import AgentConfig, AgentRuntime, RunResult, SubagentEvents, TerminationReason
from iflow.context import CharEstimateCounter, TokenCounter, apply_summary, build_summary_request, prepare
from iflow.executors.base import Executor, ExecutorError
from iflow.llm import LLMError, ParsedToolCall, Usage
from iflow.sessions import Session
from iflow.tools.base import Tool, ToolContext, ToolError, ToolKind, ToolResult
from iflow.types import (
    CompressionReport,
    ContextInputs,
    ContextState,
    EnvironmentSnapshot,
    FileModification,
    Message,
    SummaryRequest,
)

FILE_TOOLS = {"read_file", "write_file", "replace", "multi_edit"}
INTERRUPTED_RESULT = "Error: the user interrupted the turn before this call finished"


class Agent:
    """One conversation with the model. ``run(prompt)`` handles one user prompt; history carries over."""

    def __init__(
        self,
        runtime: AgentRuntime,
        tools: list[Tool],
        system_prompt: str,
        config: AgentConfig,
        session: Session | None = None,
        history: list[Message] | None = None,
        counter: TokenCounter | None = None,
        is_subagent: bool = False,
    ) -> None:
        self.runtime = runtime
        self.config = config
        self.tools = {tool.name: tool for tool in tools}
        self.system_prompt = system_prompt
        self.session = session
        self.messages: list[Message] = list(history or [])
        self.counter = counter or CharEstimateCounter()
        self.is_subagent = is_subagent
        self.session_usage = Usage()
        self.always_allowed: set[str] = set()
        self._context_state = ContextState()
        self._environment: EnvironmentSnapshot | None = None
        self._stamps: dict[str, str | None] = {}
        self._run_usage = Usage()
        self._subagent_usage = Usage()

    # -- public ------------------------------------------------------------------------------------
    def run(self, prompt: str) -> RunResult:
        started = time.monotonic()
        self._run_usage = Usage()
        rounds = 0
        last_text = ""
        if not self.messages:
            self._append({"role": "system", "content": self.system_prompt})
            self._hook_event("SessionStart", {})
            self._environment = snapshot_environment(
                self.runtime.executor,
                list(self.tools),
                self.config.environment_date,
                self.config.environment_os,
            )
        self._hook_event("UserPromptSubmit", {"prompt": prompt})
        self._append({"role": "user", "content": prompt})
        try:
            while True:
                reason = self._limit_reached(rounds, started)
                if reason is not None:
                    return self._finish(reason, rounds, started, last_text)
                messages = self._prepare(force_summary=False)
                reply = self.runtime.llm.complete(messages, self._tool_schemas(), self.runtime.events.on_text)
                self.runtime.events.on_reply_end()
                rounds += 1
                self._run_usage.add(reply.usage)
                self._append(reply.to_message())
                last_text = reply.content or last_text
                if reply.finish_reason == "length" and not reply.tool_calls:
                    self.runtime.events.on_notice("the reply was cut off at the model's output token limit")
                if not reply.tool_calls:
                    return self._finish(TerminationReason.COMPLETED, rounds, started, reply.content)
                for call in reply.tool_calls:
                    self._append(self._execute(call))
        except KeyboardInterrupt:
            self._close_pending_calls()
            if self.is_subagent:
                raise
            self.runtime.events.on_notice("interrupted")
            return self._finish(TerminationReason.INTERRUPTED, rounds, started, last_text)
        except LLMError as error:
            self._close_pending_calls()
            self.runtime.events.on_notice(str(error))
            return self._finish(TerminationReason.LLM_ERROR, rounds, started, last_text, str(error))

    def compress(self) -> CompressionReport | None:
        """A full summary now (``/compress``); None when there is nothing to summarize or it failed."""
        request = build_summary_request(self.messages, self.config.context, self.counter)
        if request is None:
            return None
        self._run_usage = Usage()
        report = self._summarize(request)
        self.session_usage.add(self._run_usage)
        return report

    def set_system_prompt(self, prompt: str) -> None:
        """A new system prompt (e.g. reloaded memory), also for the history already there."""
        self.system_prompt = prompt
        if self.messages and self.messages[0]["role"] == "system":
            self._sync_history([{"role": "system", "content": prompt}, *self.messages[1:]])

    def close(self) -> None:
        if self.messages and not self.is_subagent:
            self._hook_event("SessionEnd", {})

    # -- one turn ----------------------------------------------------------------------------------
    def _limit_reached(self, rounds: int, started: float) -> TerminationReason | None:
        if rounds >= self.config.max_turns:
            return TerminationReason.MAX_TURNS
        if self.config.max_tokens is not None and self._run_usage.total_tokens >= self.config.max_tokens:
            return TerminationReason.MAX_TOKENS
        if self.config.max_time_s is not None and time.monotonic() - started >= self.config.max_time_s:
            return TerminationReason.MAX_TIME
        return None

    def _prepare(self, force_summary: bool) -> list[Message]:
        inputs = ContextInputs(environment=self._environment, modified_files=self._outside_changes())
        prepared = prepare(
            self.messages,
            self._context_state,
            self.config.context,
            inputs=inputs,
            counter=self.counter,
            force_summary=force_summary,
        )
        self._context_state = prepared.state
        self._sync_history(prepared.messages)
        for reminder in prepared.reminders:
            if reminder.kind == "loop-detected":
                self.runtime.events.on_notice("loop detected: the model was reminded to change course")
        if prepared.compression.tier == "light":
            report = prepared.compression
            self.runtime.events.on_notice(
                f"context compressed (light): {report.tokens_before} -> {report.tokens_after} tokens"
            )
        if prepared.summary_request is not None:
            self._summarize(prepared.summary_request)
        return self.messages

    def _summarize(self, request: SummaryRequest) -> CompressionReport | None:
        self.runtime.events.on_notice("summarizing the conversation to free context ...")
        reply = self.runtime.llm.complete(list(request.messages), None, None)
        self._run_usage.add(reply.usage)
        if not reply.content.strip():
            self.runtime.events.on_notice("the summary came back empty; keeping the full history")
            return None
        contents = {}
        for path in request.touched_files:
            try:
                contents[path] = self.runtime.executor.read_text(path)
            except ExecutorError:
                continue
        history, report = apply_summary(request, reply.content, self.config.context, self.counter, contents)
        self._sync_history(history)
        self._context_state = ContextState()
        self.runtime.events.on_notice(
            f"context summarized: {report.tokens_before} -> {report.tokens_after} tokens"
        )
        return report

    def _tool_schemas(self) -> list[dict[str, Any]]:
        mode = self.config.approval_mode
        return [tool.schema() for tool in self.tools.values() if not is_refused(mode, tool.kind)]

    # -- tools -------------------------------------------------------------------------------------
    def _execute(self, call: ParsedToolCall) -> Message:
        result = self._run_tool(call)
        self.runtime.events.on_tool_result(call.name, result)
        return {"role": "tool", "tool_call_id": call.id, "content": result.output}

    def _run_tool(self, call: ParsedToolCall) -> ToolResult:
        tool = self.tools.get(call.name)
        if tool is None:
            return ToolResult.failure(
                f"there is no tool {call.name!r}; the tools are: {', '.join(self.tools)}"
            )
        if call.parse_error:
            return ToolResult.failure(f"{call.name}: {call.parse_error}")
        arguments = call.arguments
        try:
            tool.check_arguments(arguments)
        except ToolError as error:
            return ToolResult.failure(str(error))
        description = tool.describe(arguments)
        self.runtime.events.on_tool_call(tool.name, description)
        refusal = self._approval_refusal(tool, description, arguments)
        if refusal is not None:
            self.runtime.events.on_notice(f"not run: {description}")
            return ToolResult.failure(refusal)
        if self.runtime.hooks is not None:
            blocked = self.runtime.hooks.pre_tool_use(tool.name, arguments)
            if blocked is not None:
                return ToolResult.failure(f"a PreToolUse hook blocked this call: {blocked}")
        try:
            result = tool.run(arguments, self._tool_context())
        except (ToolError, ExecutorError) as error:
            result = ToolResult.failure(str(error))
        except OSError as error:
            result = ToolResult.failure(f"{type(error).__name__}: {error}")
        self._track_files(tool, arguments)
        self._run_usage_from_subagents()
        if self.runtime.hooks is not None:
            self.runtime.hooks.post_tool_use(tool.name, arguments, result.output, result.ok)
        return result

    def _approval_refusal(self, tool: Tool, description: str, arguments: dict[str, Any]) -> str | None:
        mode = self.config.approval_mode
        if is_refused(mode, tool.kind):
            return PLAN_REFUSAL
        if not needs_approval(mode, tool.kind) or tool.name in self.always_allowed:
            return None
        decision = self.runtime.approver(ApprovalRequest(tool.name, tool.kind, description, arguments))
        if decision is Decision.ALLOW_ALWAYS:
            self.always_allowed.add(tool.name)
        if decision is Decision.DENY:
            return NON_INTERACTIVE_DENIAL if self.runtime.approver is deny_all else INTERACTIVE_DENIAL
        return None

    def _tool_context(self) -> ToolContext:
        return ToolContext(
            executor=self.runtime.executor,
            todos=self.runtime.todos,
            save_memory=self.runtime.save_memory,
            run_subagent=None if self.is_subagent else self._run_subagent,
            shell_timeout_s=self.config.shell_timeout_s,
        )

    def _run_subagent(self, description: str, prompt: str, agent_type: str | None) -> str:
        name = agent_type or "general-purpose"
        spec = self.runtime.subagents.get(name)
        if spec is None:
            raise ToolError(f"there is no sub-agent {name!r}; available: {', '.join(self.runtime.subagents)}")
        tools = [
            tool
            for tool in self.tools.values()
            if tool.name != "task" and (spec.tools is None or tool.name in spec.tools)
        ]
        config = self.config.model_copy(
            update={"max_turns": spec.max_turns or self.config.subagent_max_turns}
        )
        runtime = dataclasses.replace(self.runtime, events=SubagentEvents(self.runtime.events, name))
        child = Agent(runtime, tools, spec.system_prompt, config, counter=self.counter, is_subagent=True)
        child.always_allowed = self.always_allowed
        self.runtime.events.on_notice(f"sub-agent {name} started: {description}")
        result = child.run(prompt)
        self._subagent_usage.add(result.usage)
        text = result.final_text.strip() or "(the sub-agent gave no final answer)"
        if result.termination is not TerminationReason.COMPLETED:
            return (
                f"The sub-agent stopped early ({result.termination.value}) after {result.rounds} rounds. "
                f"Its last answer:\n{text}"
            )
        return text

    def _run_usage_from_subagents(self) -> None:
        self._run_usage.add(self._subagent_usage)
        self._subagent_usage = Usage()

    # -- files changed by others -------------------------------------------------------------------
    def _track_files(self, tool: Tool, arguments: dict[str, Any]) -> None:
        if tool.name in FILE_TOOLS:
            path = str(arguments["file_path"])
            self._stamps.update(self.runtime.executor.fingerprints([path]))
        elif tool.kind is ToolKind.SHELL and self._stamps:
            # The model knows what its own commands changed; only changes by others are news.
            self._stamps.update(self.runtime.executor.fingerprints(list(self._stamps)))

    def _outside_changes(self) -> tuple[FileModification, ...]:
        if not self._stamps:
            return ()
        current = self.runtime.executor.fingerprints(list(self._stamps))
        changed = [path for path, stamp in current.items() if stamp != self._stamps.get(path)]
        self._stamps.update(current)
        return tuple(
            FileModification(path, "" if current[path] is not None else "It was deleted.") for path in changed
        )

    # -- history -----------------------------------------------------------------------------------
    def _append(self, message: Message) -> None:
        self.messages.append(message)
        if self.session is not None:
            self.session.append(message)

    def _sync_history(self, new: list[Message]) -> None:
        old = self.messages
        unchanged_prefix = len(new) >= len(old) and all(
            a is b or a == b for a, b in zip(old, new, strict=False)
        )
        self.messages = list(new)
        if self.session is None:
            return
        if unchanged_prefix:
            for message in new[len(old) :]:
                self.session.append(message)
        else:
            self.session.replace_history(new)

    def _close_pending_calls(self) -> None:
        """Give every tool call of the last assistant message a result, so the history stays valid."""
        for index in range(len(self.messages) - 1, -1, -1):
            message = self.messages[index]
            if message["role"] == "assistant":
                answered = {m.get("tool_call_id") for m in self.messages[index + 1 :]}
                for call in message.get("tool_calls") or []:
                    if call["id"] not in answered:
                        self._append(
                            {"role": "tool", "tool_call_id": call["id"], "content": INTERRUPTED_RESULT}
                        )
                return

    def _hook_event(self, event: str, payload: dict[str, Any]) -> None:
        if self.runtime.hooks is not None and not self.is_subagent:
            self.runtime.hooks.on_event(event, payload)

    def _finish(
        self, reason: TerminationReason, rounds: int, started: float, text: str, error: str | None = None
    ) -> RunResult:
        self.session_usage.add(self._run_usage)
        result = RunResult(reason, rounds, self._run_usage, time.monotonic() - started, text, error)
        if not self.is_subagent:
            self._hook_event("Stop", {"termination_reason": reason.value})
            if self.session is not None:
                self.session.record_result(result.to_dict())
        return result


def snapshot_environment(
    executor: Executor, tool_names: list[str], fixed_date: str | None = None, fixed_os: str | None = None
) -> EnvironmentSnapshot:
    """The session-start environment snapshot (the impure half of the environment reminder). `fixed_date` and
    `fixed_os` replace today's date and the executor's OS, for runs whose prompts must not change with the day
    or the machine (training, its data and its evaluations)."""
    try:
        listing = tuple(f"{e.name}/" if e.is_dir else e.name for e in executor.list_directory("."))
    except ExecutorError:
        listing = ()
    git = executor.run("git status --short --branch 2>/dev/null", timeout_s=20)
    git_status = git.output if git.exit_code == 0 and git.output.strip() else None
    if fixed_os is not None:
        os_name = fixed_os
    elif executor.kind == "local":
        os_name = f"{platform.system()} {platform.release()}"
    else:
        uname = executor.run("uname -sr", timeout_s=20)
        os_name = uname.output.strip() or "Linux"
    return EnvironmentSnapshot(
        cwd=executor.workdir,
        listing=listing,
        git_status=git_status,
        tools=tuple(tool_names),
        date=fixed_date if fixed_date is not None else date.today().isoformat(),
        os=os_name,
    )
