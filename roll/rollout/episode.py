"""What a rollout worker is asked to play and what the env manager hands back."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from roll.engine.types import GenerateResult, SamplingParams

Generate = Callable[[list[int], SamplingParams], Awaitable[GenerateResult]]


@dataclass(frozen=True)
class EpisodeTask:
    """One episode: member `index` of the group that plays env seed `seed`.

    Terminal envs: the seed picks the task; `start` is the number of expert steps prefilled (evaluation
    fixes it; None: the start-point scheduler picks it for the group)."""

    group_id: str
    seed: int
    index: int = 0
    start: int | None = None

    def sampling_seed(self, turn: int) -> int:
        """The engine seed of one LLM call: distinct per group member and turn, same on a replay."""
        return (self.seed * 1_000_003 + self.index * 1_009 + turn) % 2**31


class EpisodeError(RuntimeError):
    """An episode that could not be played for reasons outside the policy (engine or env failure)."""
