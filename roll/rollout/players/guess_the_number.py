"""A binary-search player of GEM's GuessTheNumber, writing guesses in the env's action format `\\boxed{N}`.

It reads the range from the game's instructions and narrows it with every hint, so on the easy game (1..10,
4 turns) and the hard one (1..50, 7 turns) it always wins within the turn limit.
"""

from __future__ import annotations

import re

RANGE = re.compile(r"between (\d+) and (\d+)")
HINT = re.compile(r"you guessed (\d+), and the target number is (higher|lower) than")


class PlayerError(RuntimeError):
    """An observation the player cannot read (the env changed its wording); says which one."""


class BinarySearchPlayer:
    """Guesses the middle of the range still possible, after naming that range ("6 to 10: \\boxed{8}").

    Naming the range puts the state the next guess depends on into the model's own last turn; the whole
    action stays under 16 tokens (SmolLM2 tokenizes digits one by one).
    """

    def __init__(self) -> None:
        self.low = 0
        self.high = -1

    def reset(self, observation: str) -> str:
        match = RANGE.search(observation)
        if match is None:
            raise PlayerError(
                f"no 'between A and B' in the first GuessTheNumber observation: {observation[:200]!r}"
            )
        self.low, self.high = int(match.group(1)), int(match.group(2))
        return self._guess()

    def act(self, observation: str) -> str:
        match = HINT.search(observation)
        if match is None:
            raise PlayerError(f"no 'higher'/'lower' hint in the GuessTheNumber observation {observation!r}")
        guess = int(match.group(1))
        if match.group(2) == "higher":
            self.low = max(self.low, guess + 1)
        else:
            self.high = min(self.high, guess - 1)
        return self._guess()

    def _guess(self) -> str:
        if self.low > self.high:
            raise PlayerError(f"the hints leave no number possible (range {self.low}..{self.high})")
        middle = (self.low + self.high) // 2
        return f"{self.low} to {self.high}: \\boxed{{{middle}}}"
