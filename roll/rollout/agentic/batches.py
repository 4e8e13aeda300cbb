"""What one task's round of resampled episodes gives the trainer.

- Every episode that made a model call gives its trajectory: the policy's chunks only. The replayed expert
  prefix is part of their context, so the loss mask never covers it: RL trains on what the policy said.
  Trajectories started at the same point in the same round share a group id.
- When no episode of the task succeeded in the round (no positive sample for RL), the imitation fallback adds
  one trajectory of expert chunks (`expert=True`: the IPA loss trains them by NLL only, never by RL): the
  expert steps before the latest start point and the expert's step at it, each conditioned on exactly the
  context the policy had (the recorded messages of that episode's first model call, tool results included).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from roll.rollout.agentic.expert import ExpertStep
from roll.rollout.agentic.imitation import imitation_trajectory
from roll.types import Trajectory

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from roll.rollout.agentic.episode import AgentEpisode


def group_id(task_id: str, round_index: int, start: int) -> str:
    return f"{task_id}/round{round_index}/start{start}"


def policy_trajectories(task_id: str, round_index: int, episodes: list[AgentEpisode]) -> list[Trajectory]:
    """The episodes' trajectories (those that made a model call), grouped by start point."""
    out = []
    for episode in episodes:
        if episode.trajectory is None:
            continue
        start = int(episode.trajectory.metadata.get("start", 0))
        out.append(episode.trajectory.model_copy(update={"group_id": group_id(task_id, round_index, start)}))
    return out


def fork_imitation(
    task_id: str,
    round_index: int,
    episodes: list[AgentEpisode],
    expert: list[ExpertStep],
    tokenizer: PreTrainedTokenizerBase,
) -> Trajectory | None:
    """Expert chunks up to and including the step at the round's latest start point (see the module
    docstring); None when no episode recorded a model call to take the context from."""
    recorded = [e for e in episodes if e.trajectory is not None and e.record.chunks]
    if not recorded:
        return None
    latest = max(recorded, key=lambda e: int(e.trajectory.metadata.get("start", 0)))  # type: ignore[union-attr]
    start = int(latest.trajectory.metadata.get("start", 0))  # type: ignore[union-attr]
    first_call = latest.record.chunks[0]
    messages = [*first_call.messages, expert[start].assistant_message(f"expert_{start}")]
    trajectory = imitation_trajectory(
        messages,
        tokenizer,
        first_call.tools,
        task_id=task_id,
        group_id=f"{task_id}/round{round_index}/expert",
    )
    trajectory.metadata.update(start=start, episode_id=latest.record.episode_id)
    return trajectory


def round_trajectories(
    task_id: str,
    round_index: int,
    episodes: list[AgentEpisode],
    expert: list[ExpertStep],
    tokenizer: PreTrainedTokenizerBase,
) -> list[Trajectory]:
    """The task's training data of one round: policy trajectories, plus imitation when none succeeded."""
    trajectories = policy_trajectories(task_id, round_index, episodes)
    if any(t.reward > 0 for t in trajectories):
        return trajectories
    imitation = fork_imitation(task_id, round_index, episodes, expert, tokenizer)
    return trajectories if imitation is None else [*trajectories, imitation]
