"""The episodes of an evaluation or a training round, run concurrently.

Every episode has its own sandbox and its own proxy episode; up to `parallel_episodes` run at once (threads:
an episode mostly waits on its sandbox and its model calls), so the engine receives their calls together
and batches them. Results are taken in job order, so what a round records does not depend on which
episode finished first.

- `evaluate`: the success rate of every start point 0..K-1 of every task, on the oracle experts (the same
  prefixes before and after training, so the two tables compare).
- `resample_round`: per task, `episodes_per_anchor` episodes at each of the schedule's anchors on the task's
  current expert; successes are recorded in the schedule and offered to the expert book, whose refresh
  rebases the schedule on the new expert.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rock.proxy import ProxyClient
from roll.rollout.agentic.config import IPATerminalConfig
from roll.rollout.agentic.episode import AgentEpisode, run_agent_episode
from roll.rollout.agentic.expert import ExpertStep
from roll.rollout.agentic.expert_book import ExpertBook, TaskExpert
from roll.rollout.agentic.resampling import SequentialRollback

if TYPE_CHECKING:
    from rome.terminal_tasks.task import Task


@dataclass(frozen=True)
class EpisodeJob:
    task: Task
    expert: list[ExpertStep]
    start: int


@dataclass
class TaskRound:
    """One task's share of a round: the expert its episodes ran on, the episodes, the report entry."""

    task: Task
    base: TaskExpert
    episodes: list[AgentEpisode] = field(default_factory=list)
    entry: dict[str, Any] = field(default_factory=dict)


class EpisodeRunner:
    """Runs episodes of tasks from start points through a proxy, `config.parallel_episodes` at a time."""

    def __init__(self, config: IPATerminalConfig, fleet_url: str) -> None:
        self.config, self.fleet_url = config, fleet_url

    def __call__(self, proxy_url: str, job: EpisodeJob) -> AgentEpisode:
        with ProxyClient(proxy_url) as proxy:  # one client per thread
            return run_agent_episode(
                job.task,
                proxy,
                self.fleet_url,
                agent_timeout_s=self.config.agent_timeout_s,
                expert=job.expert,
                start=job.start,
                max_turns=self.config.max_turns,
                in_sandbox=self.config.in_sandbox,
            )

    def run_all(self, proxy_url: str, jobs: list[EpisodeJob], label: str, console: Any) -> list[AgentEpisode]:
        """The episodes of `jobs`, in job order, each logged as it ends."""

        def one(job: EpisodeJob) -> AgentEpisode:
            episode = self(proxy_url, job)
            log_episode(console, label, job, episode)
            return episode

        if not jobs:
            return []
        with ThreadPoolExecutor(min(self.config.parallel_episodes, len(jobs)), "agentic-episode") as pool:
            return list(pool.map(one, jobs))


def last_answer(episode: AgentEpisode, width: int = 70) -> str:
    """What the policy did last in the episode, shortened: `ran <command>` or `said <text>`."""
    if not episode.record.chunks:
        return ""
    answer = episode.record.chunks[-1].answer
    calls = answer.get("tool_calls") or []
    if calls:
        function = calls[0].get("function") or {}
        arguments = str(function.get("arguments") or "")
        try:
            parsed = json.loads(arguments)
        except ValueError:
            parsed = None
        command = parsed.get("command") if isinstance(parsed, dict) else None
        text = f"ran {command}" if isinstance(command, str) else f"called {function.get('name')} {arguments}"
    else:
        text = f"said {answer.get('content') or ''}"
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def log_episode(console: Any, label: str, job: EpisodeJob, episode: AgentEpisode) -> None:
    chunks = len(episode.trajectory.chunks) if episode.trajectory else 0
    failure = f" ({episode.trial.failure_mode})" if episode.trial.failure_mode else ""
    console.print(
        f"{label} {job.task.id} start {job.start}/{len(job.expert)}: reward {episode.reward:g}, "
        f"{chunks} chunks{failure}; last: {last_answer(episode)}",
        markup=False,
    )


def evaluate(
    label: str,
    tasks: list[Task],
    experts: dict[str, list[ExpertStep]],
    runner: EpisodeRunner,
    proxy_url: str,
    console: Any,
) -> dict[str, dict[str, float]]:
    """Success rate of every start point 0..K-1 of every task."""
    episodes = runner.config.eval.episodes_per_start
    jobs = [
        EpisodeJob(task, experts[task.id], start)
        for task in tasks
        for start in range(len(experts[task.id]))
        for _ in range(episodes)
    ]
    results = runner.run_all(proxy_url, jobs, label, console)
    wins: dict[tuple[str, int], int] = {}
    for job, episode in zip(jobs, results, strict=True):
        key = (job.task.id, job.start)
        wins[key] = wins.get(key, 0) + int(episode.reward >= 1.0)
    return {
        task.id: {str(start): wins[(task.id, start)] / episodes for start in range(len(experts[task.id]))}
        for task in tasks
    }


def resample_round(
    round_index: int,
    tasks: list[Task],
    book: ExpertBook,
    schedules: dict[str, SequentialRollback],
    runner: EpisodeRunner,
    proxy_url: str,
    console: Any,
) -> list[TaskRound]:
    """One training round of every task: its anchors' episodes (all tasks' at once), recorded in its
    schedule (latest anchor first), successes offered to the expert book."""
    config = runner.config
    rounds = [TaskRound(task, book.current(task.id)) for task in tasks]
    jobs: list[tuple[TaskRound, EpisodeJob]] = []
    for task_round in rounds:
        schedule = schedules[task_round.task.id]
        task_round.entry = {"round": round_index, "start": schedule.current, "anchors": {}}
        for start in sorted(set(schedule.anchors(config.anchors)), reverse=True):
            job = EpisodeJob(task_round.task, task_round.base.steps, start)
            jobs.extend((task_round, job) for _ in range(config.episodes_per_anchor))
    episodes = runner.run_all(proxy_url, [job for _, job in jobs], f"round {round_index}", console)
    for (task_round, job), episode in zip(jobs, episodes, strict=True):
        task_round.episodes.append(episode)
        success = episode.reward >= 1.0
        schedules[job.task.id].record(job.start, success)
        wins, total = task_round.entry["anchors"].get(str(job.start), (0, 0))
        task_round.entry["anchors"][str(job.start)] = (wins + int(success), total + 1)
        if success and book.offer(job.task.id, task_round.base, job.start, episode.record, round_index):
            refreshed = book.current(job.task.id)
            schedules[job.task.id].rebase(len(refreshed.steps), job.start)
            task_round.entry["refreshed"] = refreshed.refreshes[-1]
            console.print(
                f"round {round_index} {job.task.id}: the episode from start {job.start} is the new expert "
                f"({len(refreshed.steps)} steps, {refreshed.native} the policy's own)"
            )
    for task_round in rounds:
        task_round.entry["next_start"] = schedules[task_round.task.id].current
        task_round.entry["expert_steps"] = len(book.current(task_round.task.id).steps)
    return rounds
