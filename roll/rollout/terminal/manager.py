"""The terminal env manager: plays agent-native episodes of terminal tasks for a rollout worker.

An episode: the task's sandbox on the ROCK fleet, the iflow agent working on it (in the worker with the ROCK
executor, or inside the sandbox), every model call through a train-mode proxy to the episode's engine
(sticky routing, as GEM episodes; called in the worker's process when the agent runs there, see `serving`),
the task's tests as reward. The proxy's chunks (exact context and output ids, logprobs, weight version)
become the trajectory. Where an episode starts and what a failed training episode leaves to imitate is
initialized resampling's, through its one entry point
(`roll.rollout.terminal.resampling.scheduler.StartScheduler`).
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from rock.proxy.client import ProxyClient
from roll.rollout.config import SamplingConfig
from roll.rollout.episode import EpisodeError, EpisodeTask
from roll.rollout.terminal.config import TerminalEnvConfig
from roll.rollout.terminal.episode import AgentEpisode, play_episode
from roll.rollout.terminal.resampling.expert import ExpertStep
from roll.rollout.terminal.resampling.scheduler import StartScheduler
from roll.rollout.terminal.run import LedgerProvider
from roll.rollout.terminal.serving import AgentEndpoints, HostProxy, ServedTokenizer
from roll.rollout.terminal.tasks import load_terminal_tasks, oracle_experts
from roll.types import Trajectory

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from roll.rollout.engine_front import EngineFront

INFRA_FAILURES = ("build_error", "sandbox_error")


class TerminalEnvManager:
    def __init__(
        self,
        config: TerminalEnvConfig,
        tokenizer: PreTrainedTokenizerBase,
        model_id: str,
        fronts: list[EngineFront],
        admin_url: str,
        start_points: Any,
        ledger: Any,
        worker_id: str,
    ) -> None:
        self.config = config
        self.tokenizer = tokenizer
        self.tasks = load_terminal_tasks(config)
        self.held_out = load_terminal_tasks(config, held_out=True)
        oracles = oracle_experts(self.tasks + self.held_out)
        self.endpoints = AgentEndpoints(fronts, ServedTokenizer(model_id, tokenizer), config.agent.timeout_s)
        self.provider = LedgerProvider(admin_url, ledger, worker_id)
        self.scheduler = StartScheduler(config, start_points, oracles, tokenizer)
        # An episode holds a thread from sandbox to verdict. The fleet runs `slots` sandboxes at once, so as
        # many threads let an evaluation use every slot; the worker's default pool is sized for training's
        # episodes_in_flight and held an 80-episode evaluation to about 9 at once.
        self._episode_threads = ThreadPoolExecutor(config.rock.slots, thread_name_prefix="terminal-episode")

    async def run_episode(
        self, task: EpisodeTask, engine: int, sampling: SamplingConfig
    ) -> tuple[Trajectory, Trajectory | None]:
        """One episode on `engine`; returns its trajectory and, for a failed training episode, the imitation
        fallback of its group (None otherwise). Infrastructure failures raise EpisodeError."""
        started = time.perf_counter()
        training = task.start is None
        # Evaluation episodes of held-out tasks name them by their index in env.held_out_task_ids.
        tasks = self.held_out if not training and self.held_out else self.tasks
        terminal_task = tasks[task.seed % len(tasks)]
        begun = await self.scheduler.begin(task, terminal_task.id)
        placement, loop = self.config.agent.placement, asyncio.get_running_loop()
        proxy = await asyncio.to_thread(self.endpoints.for_placement, placement, engine, sampling, loop)
        episode = await loop.run_in_executor(
            self._episode_threads, self._play, terminal_task, proxy, begun.expert, begun.start
        )
        record = episode.record
        if episode.failure_mode in INFRA_FAILURES:
            raise EpisodeError(f"{terminal_task.id}: {episode.failure_mode}: {episode.error}")
        if not record.chunks:
            raise EpisodeError(
                f"{terminal_task.id}: the agent made no model call ({episode.failure_mode}: {episode.error})"
            )
        success = episode.reward >= self.config.success_reward
        trajectory = self._trajectory(task, terminal_task.id, begun.start, episode, success, started)
        fallback = await self.scheduler.finish(task, terminal_task.id, begun, record, success)
        return trajectory, fallback

    def _play(self, task: Any, proxy: HostProxy | str, expert: list[ExpertStep], start: int) -> AgentEpisode:
        """`proxy`: in this process (an agent on the host), or the URL of the proxy server (in a sandbox)."""
        if isinstance(proxy, HostProxy):
            return play_episode(task, proxy, self.provider, self.config.agent, expert, start)
        with ProxyClient(proxy) as client:
            return play_episode(task, client, self.provider, self.config.agent, expert, start)

    def _trajectory(
        self,
        task: EpisodeTask,
        task_id: str,
        start: int,
        episode: AgentEpisode,
        success: bool,
        started: float,
    ) -> Trajectory:
        recorded = episode.record.chunks
        gen_s = sum(call.latency_s for call in recorded)
        wall_s = time.perf_counter() - started
        return Trajectory(
            chunks=[call.chunk for call in recorded],
            reward=episode.reward,
            task_id=task_id,
            group_id=task.group_id,
            metadata={
                "seed": task.seed,
                "index": task.index,
                "task": task_id,
                "start": start,
                "success": success,
                "turns": len(recorded),
                "end": episode.failure_mode or "completed",
                "tampered": episode.tampered is not None,
                # Model calls the proxy refused to record (not continuing the agent's context, past the cap).
                "refused_calls": episode.record.refused_calls,
                "format_errors": 0,
                "truncated_outputs": sum(call.finish_reason == "length" for call in recorded),
                "output_tokens": sum(len(call.chunk.output_ids) for call in recorded),
                "gen_s": gen_s,
                "env_s": wall_s - gen_s,
                "sandbox_s": episode.sandbox_s,
                "agent_s": episode.agent_s,
                "verifier_s": episode.verifier_s,
                "wall_s": wall_s,
                "episode_id": episode.record.episode_id,
                # The chat as the agent last sent it, and the answer: the episode's ATIF transcript.
                "transcript": [*recorded[-1].messages, recorded[-1].answer] if recorded else [],
            },
        )

    def close(self) -> None:
        self.endpoints.close()
        self._episode_threads.shutdown(wait=False, cancel_futures=True)
