"""A headless agent on the host whose tools run in a ROCK sandbox someone else owns: what agent-native
rollouts and data collection run, one per episode."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from iflow.agent.approval import ApprovalMode
from iflow.agent.build import AgentOptions, AgentParts, build_agent, llm_config
from iflow.agent.loop import Agent
from iflow.agent.runtime import AgentConfig
from iflow.executors.rock import RockExecutor
from iflow.llm import ChatEndpoint, LLMClient
from iflow.settings import load_settings
from iflow.todos import TodoStore
from iflow.types import PromptProfile

if TYPE_CHECKING:
    from iflow.executors.rock import Sandbox


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
) -> Iterator[tuple[Agent, AgentParts]]:
    """A YOLO agent and its parts; the sandbox stays open when the agent closes (its owner deletes it).
    `base_url`: the model's OpenAI base URL, or an endpoint in this process (no HTTP)."""
    endpoint = None if isinstance(base_url, str) else base_url
    cwd = Path(tempfile.mkdtemp(prefix=tmp_prefix))  # empty: no host memory or hooks leak into the agent
    try:
        options = AgentOptions(
            cwd=cwd,
            base_url=base_url if endpoint is None else endpoint.name,
            model=model,
            approval_mode=ApprovalMode.YOLO,
            prompt_profile=prompt_profile,
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
