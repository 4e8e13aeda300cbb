"""Wire an agent from settings and command-line options: model, executor, memory, hooks, sub-agents; and
`sandbox_agent`, the headless agent on the host whose tools run in a ROCK sandbox someone else owns (what
agent-native rollouts and data collection run, one per episode)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from iflow import memory, workflows
from iflow.agent.approval import ApprovalMode, Approver, deny_all
from iflow.agent.loop import Agent
from iflow.agent.prompts import GENERAL_PURPOSE, main_system_prompt
from iflow.agent.runtime import AgentConfig, AgentEvents, AgentRuntime, SubagentSpec
from iflow.executors.base import Executor
from iflow.executors.rock import RockExecutor
from iflow.hooks import HookEvent, run_hooks
from iflow.llm import ChatEndpoint, LLMClient, LLMConfig
from iflow.sessions import Session
from iflow.settings import Settings, load_settings, project_root
from iflow.todos import TodoStore
from iflow.tools import tools_for
from iflow.types import FixedEnvironment, PromptProfile

if TYPE_CHECKING:
    from iflow.executors.rock import Sandbox


class ConfigurationError(Exception):
    """The model or executor cannot be set up from the settings and flags given."""


@dataclass
class AgentOptions:
    """What the command line may override; None means "from settings"."""

    cwd: Path
    base_url: str | None = None
    api_key: str | None = None
    model: str | None = None
    approval_mode: ApprovalMode | None = None
    max_turns: int | None = None
    max_tokens: int | None = None
    max_time_s: float | None = None
    tool_format: Literal["native", "text"] = "native"
    prompt_profile: PromptProfile | None = None
    sandbox_image: str | None = None  # set: tools run in a ROCK sandbox from this image
    sandbox_workdir: str = "/tmp/workspace"  # the working directory is copied into it
    environment_date: str | None = None  # set: the environment reminder states it instead of today's date
    environment_os: str | None = None  # set: the environment reminder states it instead of the executor's OS


def llm_config(settings: Settings, options: AgentOptions) -> LLMConfig:
    base_url = options.base_url or settings.base_url
    model = options.model or settings.model_name
    if not base_url:
        raise ConfigurationError(
            "no model endpoint is configured: pass --base-url http://HOST:PORT/v1, or set baseUrl in "
            "~/.iflow/settings.json (or the IFLOW_baseUrl environment variable)"
        )
    if not model:
        raise ConfigurationError(
            "no model name is configured: pass --model NAME, or set modelName in ~/.iflow/settings.json "
            "(or the IFLOW_modelName environment variable)"
        )
    return LLMConfig(
        base_url=base_url,
        api_key=options.api_key or settings.api_key,
        model=model,
        tool_format=options.tool_format,
    )


class SettingsHooks:
    """The hooks of ``settings.json`` (see ``iflow.hooks``) as the agent calls them."""

    def __init__(self, settings: Settings, cwd: Path, events: AgentEvents) -> None:
        self.hooks = settings.hooks
        self.cwd = cwd
        self.events = events

    def pre_tool_use(self, tool: str, arguments: dict[str, Any]) -> str | None:
        outcome = run_hooks(
            self.hooks, "PreToolUse", {"tool_name": tool, "tool_input": arguments}, self.cwd, tool
        )
        return outcome.message if outcome.blocked else None

    def post_tool_use(self, tool: str, arguments: dict[str, Any], output: str, ok: bool) -> None:
        payload = {"tool_name": tool, "tool_input": arguments, "tool_response": {"output": output, "ok": ok}}
        self._report(run_hooks(self.hooks, "PostToolUse", payload, self.cwd, tool).message)

    def on_event(self, event: str, payload: dict[str, Any]) -> None:
        hook_event: HookEvent = event  # type: ignore[assignment]
        self._report(run_hooks(self.hooks, hook_event, payload, self.cwd).message)

    def _report(self, message: str) -> None:
        if message:
            self.events.on_notice(message)


def make_executor(options: AgentOptions) -> Executor:
    if options.sandbox_image is None:
        from iflow.executors.local import LocalExecutor

        return LocalExecutor(options.cwd)
    return RockExecutor.start(options.sandbox_image, workdir=options.sandbox_workdir, upload=options.cwd)


@dataclass
class AgentParts:
    """What a front end holds on to besides the agent: to rebuild it (/clear, /resume) and to close it."""

    settings: Settings
    options: AgentOptions
    llm: LLMClient
    executor: Executor
    todos: TodoStore
    config: AgentConfig

    @property
    def prompt_profile(self) -> PromptProfile:
        """The command line's profile, else the settings' (``promptProfile``)."""
        return self.options.prompt_profile or self.settings.prompt_profile

    def close(self) -> None:
        self.executor.close()
        self.llm.close()


def build_parts(options: AgentOptions) -> AgentParts:
    settings = load_settings(options.cwd)
    workflows.load_agents(options.cwd)  # a broken agent file is reported now, not at the first task call
    llm = LLMClient(llm_config(settings, options))
    mode = options.approval_mode or ApprovalMode(settings.approval_mode)
    limits = {
        key: value
        for key, value in {
            "max_turns": options.max_turns,
            "max_tokens": options.max_tokens,
            "max_time_s": options.max_time_s,
        }.items()
        if value is not None
    }
    config = AgentConfig(
        approval_mode=mode,
        context=settings.context,
        environment_date=options.environment_date,
        environment_os=options.environment_os,
        **limits,
    )
    executor = make_executor(options)
    todos = TodoStore(str(project_root(options.cwd)) if options.sandbox_image is None else executor.workdir)
    return AgentParts(settings, options, llm, executor, todos, config)


def load_memory(cwd: Path) -> str:
    """IFLOW.md / AGENTS.md memory for the system prompt (see ``iflow.memory``)."""
    return memory.load_memory(cwd).text()


def save_memory(fact: str) -> str:
    return str(memory.save_memory(fact))


def subagent_specs(cwd: Path) -> dict[str, SubagentSpec]:
    """The built-in general-purpose sub-agent plus those defined in ``.iflow/agents/*.md``."""
    specs = {GENERAL_PURPOSE.name: GENERAL_PURPOSE}
    for name, definition in workflows.load_agents(cwd).items():
        specs[name] = SubagentSpec(
            name=name,
            description=definition.description,
            system_prompt=definition.system_prompt or GENERAL_PURPOSE.system_prompt,
            tools=definition.tools,
            max_turns=definition.max_turns,
        )
    return specs


def system_prompt(cwd: Path, mode: ApprovalMode, profile: PromptProfile = "full") -> str:
    """The main agent's system prompt: instructions, memory files, the sub-agents it may start."""
    return main_system_prompt(mode, load_memory(cwd), list(subagent_specs(cwd).values()), profile)


def build_agent(
    parts: AgentParts,
    approver: Approver = deny_all,
    events: AgentEvents | None = None,
    session: Session | None = None,
) -> Agent:
    events = events or AgentEvents()
    cwd = parts.options.cwd
    runtime = AgentRuntime(
        llm=parts.llm,
        executor=parts.executor,
        todos=parts.todos,
        save_memory=save_memory,
        approver=approver,
        events=events,
        hooks=SettingsHooks(parts.settings, cwd, events) if parts.settings.hooks else None,
        subagents=subagent_specs(cwd),
    )
    prompt = system_prompt(cwd, parts.config.approval_mode, parts.prompt_profile)
    history = session.messages if session is not None else None
    tools = tools_for(parts.prompt_profile)
    return Agent(runtime, tools, prompt, parts.config, session=session, history=history)


@contextmanager
def sandbox_agent(
    sandbox: Sandbox,
    workdir: str,
    base_url: str | ChatEndpoint,
    model: str,
    timeout_s: float,
    max_turns: int,
    prompt_profile: PromptProfile | None = None,
    tmp_prefix: str = "iflow-sandbox-",
    environment: FixedEnvironment | None = None,
) -> Iterator[tuple[Agent, AgentParts]]:
    """A YOLO agent and its parts; the sandbox stays open when the agent closes (its owner deletes it).
    `base_url`: the model's OpenAI base URL, or an endpoint in this process (no HTTP). `environment`: the date
    and OS its environment reminder states (default: today's and the sandbox's)."""
    endpoint = None if isinstance(base_url, str) else base_url
    cwd = Path(tempfile.mkdtemp(prefix=tmp_prefix))  # empty: no host memory or hooks leak into the agent
    try:
        options = AgentOptions(
            cwd=cwd,
            base_url=base_url if endpoint is None else endpoint.name,
            model=model,
            approval_mode=ApprovalMode.YOLO,
            prompt_profile=prompt_profile,
            environment_date=environment.date if environment else None,
            environment_os=environment.os if environment else None,
        )
        settings = load_settings(cwd)
        # One call may take as long as the episode: a shorter read timeout would retry it while the
        # engine still works on the first request (on a loaded CPU one call can take minutes).
        llm = LLMClient(
            llm_config(settings, options).model_copy(update={"timeout_s": timeout_s}), endpoint=endpoint
        )
        executor = RockExecutor(sandbox, workdir=workdir)
        config = AgentConfig(
            approval_mode=ApprovalMode.YOLO,
            context=settings.context,
            max_time_s=timeout_s,
            max_turns=max_turns,
            environment_date=options.environment_date,
            environment_os=options.environment_os,
        )
        parts = AgentParts(settings, options, llm, executor, TodoStore(executor.workdir), config)
        agent = build_agent(parts)
        try:
            yield agent, parts
        finally:
            agent.close()
            llm.close()
    finally:
        shutil.rmtree(cwd, ignore_errors=True)
