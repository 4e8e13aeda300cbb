"""One agent-native episode: the task's sandbox, the iflow agent driving it with its model at a proxy episode
(train mode), then the task's tests; the proxy's record holds every model call as a chunk.

Blocking from start to end (sandbox calls, the agent's loop): the env manager runs it in a thread.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rock.proxy.client import ProxyClient
from rock.proxy.types import EpisodeRecord
from roll.rollout.terminal.agent import ResampledIflowAgent, expert_messages
from roll.rollout.terminal.config import AgentConfig
from roll.rollout.terminal.expert import ExpertStep
from roll.rollout.terminal.in_sandbox import InSandboxIflowAgent
from rome.bench.iflow_agent import resolve_endpoint
from rome.bench.images import TaskImageError, ensure_image
from rome.bench.sandbox import SandboxProvider
from rome.bench.tasks import Task
from rome.bench.trial import TrialResult, run_trial


@dataclass
class AgentEpisode:
    """What one episode produced: the trial (reward, failure mode, timings) and the proxy's record."""

    trial: TrialResult
    record: EpisodeRecord


def agent_context_settings() -> dict[str, Any]:
    """The context settings iflow runs with from an empty project folder (global settings still apply), which
    the proxy must share so its compression thresholds fall where the agent's do."""
    from iflow.settings import load_settings

    folder = Path(tempfile.mkdtemp(prefix="ale-terminal-"))
    try:
        return load_settings(folder).context.model_dump(by_alias=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def play_episode(
    task: Task,
    proxy: ProxyClient,
    provider: SandboxProvider,
    agent: AgentConfig,
    expert: list[ExpertStep],
    start: int,
) -> AgentEpisode:
    """Run the iflow agent on `task` after the first `start` expert steps (replayed in the sandbox, their
    messages in the agent's history), grade it with the task's tests, and return the proxy's record of its
    model calls. With placement `sandbox` the proxy must run on the sandbox's host (the rocklet's forwarder
    reaches it through the sandbox's socket folder)."""
    if not 0 <= start <= len(expert):
        raise ValueError(f"start {start} is outside 0..{len(expert)} (the expert trajectory's length)")
    task = task.model_copy(update={"agent_timeout_sec": agent.timeout_s})
    try:
        image: str | None = ensure_image(task)
        build_error = None
    except TaskImageError as error:
        image, build_error = None, str(error)
    episode_id = proxy.open_episode(f"{task.id}-{uuid.uuid4().hex[:8]}", context=agent_context_settings())
    try:
        base_url, model = resolve_endpoint(proxy.episode_url(episode_id))
        assert base_url is not None and model is not None
        runner: ResampledIflowAgent | InSandboxIflowAgent
        if agent.placement == "sandbox":
            prefix = expert_messages(expert[:start])
            runner = InSandboxIflowAgent(proxy, episode_id, model, agent.max_turns, prefix)
        else:
            runner = ResampledIflowAgent(base_url, model, expert, start, agent.max_turns)
        trial = run_trial(task, 0, runner, provider, image, build_error=build_error)
    finally:
        record = proxy.end_episode(episode_id)
    return AgentEpisode(trial=trial, record=record)
