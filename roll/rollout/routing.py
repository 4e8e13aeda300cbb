"""Which engine plays an episode: sticky per episode, least loaded for a new one.

Every LLM call of an episode goes to the engine that served its first call: the next call's context is the
previous context plus a few tokens, so that engine's prefix cache already holds almost all of it. A new
episode goes to the awake engine with the fewest episodes in flight (ties: the lowest index). An episode
keeps its engine when that engine is later put to sleep: its requests wait for the wake-up instead of
re-prefilling the whole context elsewhere.
"""

from __future__ import annotations


class EngineRouter:
    def __init__(self, num_engines: int) -> None:
        if num_engines < 1:
            raise ValueError(f"an engine router needs at least one engine, got {num_engines}")
        self.load = [0] * num_engines
        self.active = list(range(num_engines))

    def set_active(self, indices: list[int]) -> None:
        """New episodes go only to these engines; an empty list means all of them."""
        unknown = [i for i in indices if not 0 <= i < len(self.load)]
        if unknown:
            raise ValueError(f"engine indices {unknown} out of range 0..{len(self.load) - 1}")
        self.active = sorted(set(indices)) or list(range(len(self.load)))

    def acquire(self) -> int:
        """The engine of a new episode (least loaded of the active ones); counts the episode on it."""
        index = min(self.active, key=lambda i: (self.load[i], i))
        self.load[index] += 1
        return index

    def release(self, index: int) -> None:
        """The episode on engine `index` ended."""
        if self.load[index] <= 0:
            raise ValueError(f"engine {index} has no episode in flight to release")
        self.load[index] -= 1
