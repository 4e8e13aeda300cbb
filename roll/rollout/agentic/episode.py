"""One agent-native episode: sandbox, iflow agent (host side, ROCK executor) via the proxy, tests, chunks."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from rock.proxy.client import ProxyClient
from rock.proxy.types import EpisodeRecord
from roll.rollout.agentic.agent import ResampledIflowAgent, expert_messages
from roll.rollout.agentic.expert import ExpertStep
from roll.rollout.agentic.in_sandbox import InSandboxIflowAgent
from roll.types import Trajectory
from rome.bench.iflow_agent import resolve_endpoint
from rome.bench.trial import TrialResult, run_trial
from rome.terminal_tasks.images import TaskImageError, ensure_image
from rome.terminal_tasks.rock_sandbox import RockProvider
from rome.terminal_tasks.task import Task


@dataclass
class AgentEpisode:
    """What one episode produced. `trajectory` is None when the agent made no model call (then `trial` says
    why: a build, sandbox or agent error)."""

    trial: TrialResult
    trajectory: Trajectory | None
    record: EpisodeRecord

    @property
    def reward(self) -> float:
        return self.trial.reward


def agent_context_settings() -> dict[str, object]:
    """The context settings iflow runs with from an empty project folder (global settings still apply), which
    the proxy must share so its compression thresholds fall where the agent's do."""
    from iflow.settings import load_settings

    folder = Path(tempfile.mkdtemp(prefix="ale-agentic-"))
    try:
        return load_settings(folder).context.model_dump(by_alias=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run_agent_episode(
    task: Task,
    proxy: ProxyClient,
    admin_url: str | None,
    *,
    attempt: int = 0,
    group_id: str = "",
    agent_timeout_s: float | None = None,
    expert: list[ExpertStep] | None = None,
    start: int = 0,
    max_turns: int = 20,
    in_sandbox: bool = False,
) -> AgentEpisode:
    """Run the iflow agent on `task` with its model at the proxy (which must be in train mode), grade it with
    the task's tests, and collect the episode's chunks from the proxy as a trajectory.

    With `expert` and `start = k`, the first k expert steps are replayed before the policy continues
    (initialized resampling); the trajectory holds the policy's chunks only, its metadata the start.
    With `in_sandbox`, iflow runs inside the sandbox and reaches the proxy through the rocklet's forwarder
    (the proxy must run on the worker's host); an expert prefix is then replayed inside the sandbox."""
    expert = expert or []
    if not 0 <= start <= len(expert):
        raise ValueError(f"start {start} is outside 0..{len(expert)} (the expert trajectory's length)")
    if agent_timeout_s is not None:
        task = task.model_copy(update={"agent_timeout_sec": agent_timeout_s})
    try:
        image: str | None = ensure_image(task)
        build_error = None
    except TaskImageError as error:
        image, build_error = None, str(error)
    episode_id = proxy.open_episode(f"{task.id}-{uuid.uuid4().hex[:8]}", context=agent_context_settings())
    try:
        base_url, model = resolve_endpoint(proxy.episode_url(episode_id))
        assert base_url is not None and model is not None
        agent: ResampledIflowAgent | InSandboxIflowAgent
        if in_sandbox:
            prefix = expert_messages(expert[:start])
            agent = InSandboxIflowAgent(proxy, episode_id, model, max_turns, prefix)
        else:
            agent = ResampledIflowAgent(base_url, model, expert, start, max_turns)
        trial = run_trial(task, attempt, agent, RockProvider(admin_url), image, build_error=build_error)
    finally:
        record = proxy.end_episode(episode_id)
    chunks = [recorded.chunk for recorded in record.chunks]
    trajectory = None
    if chunks:
        trajectory = Trajectory(
            chunks=chunks,
            reward=trial.reward,
            task_id=task.id,
            group_id=group_id,
            metadata={
                "episode_id": episode_id,
                "failure_mode": trial.failure_mode,
                "attempt": attempt,
                "start": start,
            },
        )
    return AgentEpisode(trial=trial, trajectory=trajectory, record=record)
