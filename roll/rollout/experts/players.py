"""Which scripted expert plays which GEM env id."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from roll.rollout.experts.guess_the_number import BinarySearchPlayer


class ExpertPlayer(Protocol):
    def reset(self, observation: str) -> str:
        """The first action, given the env's first observation."""
        ...

    def act(self, observation: str) -> str:
        """The next action, given the observation that followed the previous one."""
        ...


EXPERTS: dict[str, Callable[[], ExpertPlayer]] = {
    "game:GuessTheNumber-v0-easy": BinarySearchPlayer,
    "game:GuessTheNumber-v0-hard": BinarySearchPlayer,
}


def expert_for(env_id: str) -> ExpertPlayer:
    factory = EXPERTS.get(env_id)
    if factory is None:
        raise KeyError(
            f"no scripted expert plays {env_id!r}; experts exist for: {', '.join(sorted(EXPERTS))}"
        )
    return factory()
