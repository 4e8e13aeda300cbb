"""One agent-native episode: the task's sandbox, the iflow agent driving it with its model at a proxy episode
(train mode), then the task's own tests; the proxy's record holds every model call as a chunk.

The agent runs on the host with its tools in the sandbox (placement host), or inside the sandbox
(placement sandbox, `roll.rollout.terminal.in_sandbox`). With `start = k > 0` it begins after the first k
expert steps (initialized resampling): they are replayed through iflow's own shell tool, their messages
follow the instruction in the agent's history (`roll.rollout.terminal.resampling.prefill`), and the policy is
asked to continue (`CONTINUE_PROMPT`).

Blocking from start to end (sandbox calls, the agent's loop): the env manager runs it in a thread.
"""

from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from iflow.agent import TerminationReason
from iflow.agent.build import sandbox_agent
from iflow.llm import ChatEndpoint
from rock.proxy.client import ProxyClient
from rock.proxy.types import EpisodeRecord
from rock.sdk import ImageInfo
from roll.rollout.terminal.config import TerminalAgentConfig
from roll.rollout.terminal.resampling.expert import ExpertStep
from roll.rollout.terminal.resampling.prefill import CONTINUE_PROMPT, prefilled_history
from roll.rollout.terminal.serving import HostProxy
from rome.terminal_tasks.rock_sandbox import RockSandbox
from rome.terminal_tasks.sandbox import SandboxError
from rome.terminal_tasks.task import Task, TaskImageError
from rome.terminal_tasks.verifier import verify

FailureMode = Literal[
    "build_error", "sandbox_error", "agent_timeout", "agent_error", "test_timeout", "verifier_error"
]
# The name the agent asks for; the train-mode proxy sends every call to its engine's own model.
POLICY_MODEL = "policy"


@dataclass(frozen=True)
class AgentOutcome:
    """How the agent's run ended: past its time limit, with an error, and its log."""

    timed_out: bool = False
    error: str | None = None
    log: str = ""


class SandboxOpener(Protocol):
    def image(self, task: Task) -> ImageInfo:
        """The task's image on the fleet (TaskImageError when it does not build)."""

    def open(self, image: ImageInfo, task: Task) -> RockSandbox: ...


@dataclass
class AgentEpisode:
    """What one episode produced: its test reward (or why there is none), timings, and the proxy's record."""

    task_id: str
    record: EpisodeRecord
    reward: float = 0.0
    failure_mode: FailureMode | None = None
    error: str | None = None
    agent_log: str = ""
    sandbox_s: float = 0.0
    agent_s: float = 0.0
    verifier_s: float = 0.0
    tampered: str | None = None
    """Why the grading guard would not grade the sandbox (the agent changed the tools its tests run on, or
    something it left outlived the cull): the reward is 0 and the run's metrics count the episode."""


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
    proxy: ProxyClient | HostProxy,
    sandboxes: SandboxOpener,
    agent: TerminalAgentConfig,
    expert: list[ExpertStep],
    start: int,
) -> AgentEpisode:
    """Run the iflow agent on `task` after the first `start` expert steps (replayed in the sandbox, their
    messages in the agent's history), grade it with the task's tests, and return the proxy's record of its
    model calls. With placement `host` the proxy may run in this process (`HostProxy`: the agent calls it
    without HTTP); with placement `sandbox` it must be a server on the sandbox's host (`ProxyClient`: the
    rocklet's forwarder reaches it through the sandbox's socket folder)."""
    if not 0 <= start <= len(expert):
        raise ValueError(f"start {start} is outside 0..{len(expert)} (the expert trajectory's length)")
    episode_id = proxy.open_episode(f"{task.id}-{uuid.uuid4().hex[:8]}", context=agent_context_settings())
    episode = AgentEpisode(task.id, EpisodeRecord(episode_id=episode_id))
    try:
        _play(episode, task, proxy, sandboxes, agent, expert, start)
    finally:
        episode.record = proxy.end_episode(episode_id)
    return episode


def _play(
    episode: AgentEpisode,
    task: Task,
    proxy: ProxyClient | HostProxy,
    sandboxes: SandboxOpener,
    agent: TerminalAgentConfig,
    expert: list[ExpertStep],
    start: int,
) -> None:
    try:
        image = sandboxes.image(task)
    except TaskImageError as error:
        episode.failure_mode, episode.error = "build_error", str(error)
        return
    opened = time.monotonic()
    try:
        sandbox = sandboxes.open(image, task)
    except SandboxError as error:
        episode.failure_mode, episode.error = "sandbox_error", str(error)
        return
    episode.sandbox_s = time.monotonic() - opened
    try:
        started = time.monotonic()
        outcome = _run_agent(sandbox, task, proxy, episode.record.episode_id, agent, expert, start)
        episode.agent_s = time.monotonic() - started
        episode.agent_log = outcome.log
        if outcome.timed_out:
            episode.failure_mode = "agent_timeout"
            episode.error = f"the agent ran past its {agent.timeout_s:.0f} s"
        elif outcome.error:
            episode.failure_mode, episode.error = "agent_error", outcome.error
        verdict = verify(sandbox, task)
        episode.verifier_s = verdict.duration_sec
        episode.reward = verdict.reward
        episode.tampered = verdict.tampered
        if verdict.failure_mode is not None:
            episode.failure_mode, episode.error = verdict.failure_mode, verdict.error
    except SandboxError as error:
        episode.failure_mode, episode.error = "sandbox_error", str(error)
    finally:
        closing = time.monotonic()
        sandbox.close()
        episode.sandbox_s += time.monotonic() - closing


def expert_messages(steps: list[ExpertStep]) -> list[dict[str, object]]:
    """The expert steps as the assistant messages of a history (call ids `expert_<index>`)."""
    return [step.assistant_message(f"expert_{index}") for index, step in enumerate(steps)]


def _run_agent(
    sandbox: RockSandbox,
    task: Task,
    proxy: ProxyClient | HostProxy,
    episode_id: str,
    agent: TerminalAgentConfig,
    expert: list[ExpertStep],
    start: int,
) -> AgentOutcome:
    if agent.placement == "sandbox" and not isinstance(proxy, ProxyClient):
        raise ValueError(
            "an agent inside the sandbox reaches its model through the rocklet's forwarder, which needs "
            "the proxy served over HTTP: pass a ProxyClient, or use placement host"
        )
    try:
        if agent.placement == "sandbox" and isinstance(proxy, ProxyClient):
            return _run_in_sandbox(sandbox, task, proxy, episode_id, agent, expert[:start])
        model = proxy.endpoint(episode_id) if isinstance(proxy, HostProxy) else proxy.episode_url(episode_id)
        return _run_on_host(sandbox, task, model, agent, expert[:start])
    except SandboxError:
        raise
    except Exception as error:  # an agent crash is the episode's outcome, not the harness's failure
        return AgentOutcome(error=f"{type(error).__name__}: {error}")


def _run_on_host(
    sandbox: RockSandbox,
    task: Task,
    model: str | ChatEndpoint,
    agent: TerminalAgentConfig,
    prefix: list[ExpertStep],
) -> AgentOutcome:
    """iflow in this process against `model` (the episode's proxy endpoint, or an OpenAI base URL), its
    tools in the sandbox, after the expert steps of `prefix`."""
    with sandbox_agent(
        sandbox.rock,
        sandbox.workdir,
        model,
        POLICY_MODEL,
        agent.timeout_s,
        agent.max_turns,
        agent.prompt_profile,
        tmp_prefix="ale-terminal-",
        environment=agent.environment,
    ) as (runner, parts):
        prompt = task.instruction
        if prefix:
            runner.messages = prefilled_history(parts, task.instruction, expert_messages(prefix))
            prompt = CONTINUE_PROMPT
        result = runner.run(prompt)
    log = f"[iflow] start {len(prefix)}: {result.termination.value}, {result.rounds} rounds"
    error = None
    if result.termination not in (TerminationReason.COMPLETED, TerminationReason.MAX_TURNS):
        error = f"iflow stopped: {result.termination.value}" + (f" ({result.error})" if result.error else "")
    return AgentOutcome(timed_out=result.termination is TerminationReason.MAX_TIME, error=error, log=log)


def _run_in_sandbox(
    sandbox: RockSandbox,
    task: Task,
    proxy: ProxyClient,
    episode_id: str,
    agent: TerminalAgentConfig,
    prefix: list[ExpertStep],
) -> AgentOutcome:
    # Imported here: the in-sandbox agent returns this module's AgentOutcome.
    from roll.rollout.terminal.in_sandbox import InSandboxIflowAgent

    runner = InSandboxIflowAgent(
        proxy,
        episode_id,
        POLICY_MODEL,
        agent.max_turns,
        expert_messages(prefix),
        agent.prompt_profile,
        agent.environment,
    )
    return runner.run(sandbox, task, timeout=agent.timeout_s)
