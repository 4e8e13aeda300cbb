"""Which scripted player plays which GEM env id."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from roll.rollout.players.guess_the_number import BinarySearchPlayer


class ScriptedPlayer(Protocol):
    def reset(self, observation: str) -> str:
        """The first action, given the env's first observation."""
        ...

    def act(self, observation: str) -> str:
        """The next action, given the observation that followed the previous one."""
        ...


PLAYERS: dict[str, Callable[[], ScriptedPlayer]] = {
    "game:GuessTheNumber-v0-easy": BinarySearchPlayer,
    "game:GuessTheNumber-v0-hard": BinarySearchPlayer,
}


def player_for(env_id: str) -> ScriptedPlayer:
    factory = PLAYERS.get(env_id)
    if factory is None:
        raise KeyError(
            f"no scripted player plays {env_id!r}; players exist for: {', '.join(sorted(PLAYERS))}"
        )
    return factory()
