"""Chunk-level initialized resampling: where episodes start in the expert trajectory, and which chunk is
the crucial fork. Pure bookkeeping over success counts; no I/O.

A start point k means: the first k expert chunks are prefilled (their commands replayed, their messages in the
context) and the policy continues from there. k = K is the full expert; k = 0 is from scratch.

- Sequential rollback: start near the end (k = K - 1); once the success rate at the current start reaches
  `threshold` over at least `min_samples` episodes, move the start back one chunk, down to 0. With a
  `window`, only the latest `window` episodes at a start count: the policy changes every round, so the
  failures before it learned a start would otherwise hold it there long after it succeeds.
- Parallelized initialization: several anchors in one batch, the current start and the ones before it.
- Crucial fork: the chunk k where success when starting after it (k + 1) is much higher than before it (k).
"""

from __future__ import annotations

from dataclasses import dataclass, field


def success_rate(outcomes: list[bool]) -> float:
    return sum(outcomes) / len(outcomes) if outcomes else 0.0


@dataclass
class StartStats:
    """The outcomes of the episodes started at one point, in order."""

    outcomes: list[bool] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return success_rate(self.outcomes)


@dataclass
class SequentialRollback:
    """The start point of one task's episodes, moved back as the policy learns to succeed from it."""

    num_chunks: int
    threshold: float = 0.5
    min_samples: int = 4
    window: int | None = None
    current: int = field(init=False)
    stats: dict[int, StartStats] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        if self.num_chunks < 1:
            raise ValueError(f"an expert trajectory needs at least one chunk, got {self.num_chunks}")
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {self.threshold}")
        if self.window is not None and self.window < self.min_samples:
            raise ValueError(
                f"window ({self.window}) must be at least min_samples ({self.min_samples}), or the start "
                "could never move back"
            )
        self.current = self.num_chunks - 1

    def record(self, start: int, success: bool) -> None:
        """Count one episode started at `start`; the current start moves back when it is learned."""
        if not 0 <= start <= self.num_chunks:
            raise ValueError(f"start {start} is outside 0..{self.num_chunks}")
        self.stats.setdefault(start, StartStats()).outcomes.append(success)
        outcomes = self.stats.get(self.current, StartStats()).outcomes
        recent = outcomes if self.window is None else outcomes[-self.window :]
        if self.current > 0 and len(recent) >= self.min_samples and success_rate(recent) >= self.threshold:
            self.current -= 1

    def rebase(self, num_chunks: int, shared: int) -> None:
        """The task's expert changed: it now has `num_chunks` chunks, of which the first `shared` are the old
        ones. Counts at later starts measured a different prefix, so they are dropped; the current start
        stays where it is unless the new expert is too short for it."""
        if num_chunks < 1 or not 0 <= shared <= num_chunks:
            raise ValueError(
                f"a rebase needs 1 <= num_chunks and 0 <= shared <= num_chunks, got {num_chunks}, {shared}"
            )
        self.num_chunks = num_chunks
        self.stats = {start: stats for start, stats in self.stats.items() if start <= shared}
        self.current = min(self.current, num_chunks - 1)

    def anchors(self, count: int) -> list[int]:
        """`count` start points for one batch: the current start and up to count - 1 before it (parallel
        initialization), never below 0; a batch may repeat the earliest anchor to fill up."""
        if count < 1:
            raise ValueError(f"count must be at least 1, got {count}")
        points = [max(self.current - offset, 0) for offset in range(count)]
        return points

    def rates(self) -> dict[int, float]:
        return {start: stats.rate for start, stats in sorted(self.stats.items())}


def crucial_fork(rates: dict[int, float], min_gap: float = 0.3) -> int | None:
    """The chunk index k (0-based) with the largest rate(k + 1) - rate(k), if that gap is at least `min_gap`.

    rate(s) is the success rate of episodes whose first s expert chunks were prefilled: a large jump between
    s = k and s = k + 1 means expert chunk k is the decision the policy gets wrong.
    """
    best: tuple[float, int] | None = None
    for start in sorted(rates):
        after = rates.get(start + 1)
        if after is None:
            continue
        gap = after - rates[start]
        if gap >= min_gap and (best is None or gap > best[0]):
            best = (gap, start)
    return None if best is None else best[1]
