"""What a learning claim rests on: a run's evaluations (its eval.jsonl records) compared instance by
instance, and two runs' final evaluations compared on the same held-out instances. Pure: records in, rows
out (`benchmarks/learning.py` reads the runs and prints the table)."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

from roll.pipeline.display import sign_test_p

Record = dict[str, Any]


@dataclass(frozen=True)
class Paired:
    """Two evaluations of the same instances: success rates, instances won by the second only (gained),
    by the first only (lost), and the two-sided exact sign test's p."""

    before: float
    after: float
    gained: int
    lost: int
    p: float

    @property
    def points(self) -> float:
        """The gain in percentage points."""
        return 100 * (self.after - self.before)


def paired(before: Record, after: Record) -> Paired:
    """`after` against `before`, instance by instance (their won_seeds)."""
    won_before, won_after = set(before["won_seeds"]), set(after["won_seeds"])
    gained, lost = len(won_after - won_before), len(won_before - won_after)
    return Paired(before["success"], after["success"], gained, lost, sign_test_p(gained, lost))


@dataclass(frozen=True)
class RunRow:
    """One run's learning: base, after SFT and after RL on the in-family held-out set, SFT against base and
    RL against SFT, and RL against SFT on the out-of-family set when the run has one. None where the run has
    no such evaluation (it failed, or skipped the base evaluation)."""

    name: str
    base: float | None
    sft: float | None
    rl: float | None
    sft_vs_base: Paired | None
    rl_vs_sft: Paired | None
    out_of_family: Paired | None
    episodes: int

    def as_json(self) -> dict[str, Any]:
        row = asdict(self)
        for key in ("sft_vs_base", "rl_vs_sft", "out_of_family"):
            value = getattr(self, key)
            if value is not None:
                row[key]["points"] = value.points
        return row


def _by_label(evals: list[Record]) -> dict[str, Record]:
    return {row["label"]: row for row in evals if row.get("episodes")}


def run_row(name: str, evals: list[Record]) -> RunRow:
    """The row of one run from its eval records (labels `base`, `after SFT`, `after RL`)."""
    by_label = _by_label(evals)
    base, sft, rl = (by_label.get(label) for label in ("base", "after SFT", "after RL"))
    apart = None
    if sft is not None and rl is not None:
        sft_other, rl_other = sft.get("out_of_family"), rl.get("out_of_family")
        if sft_other and rl_other and sft_other.get("episodes") and rl_other.get("episodes"):
            apart = paired(sft_other, rl_other)
    return RunRow(
        name=name,
        base=base["success"] if base else None,
        sft=sft["success"] if sft else None,
        rl=rl["success"] if rl else None,
        sft_vs_base=paired(base, sft) if base is not None and sft is not None else None,
        rl_vs_sft=paired(sft, rl) if sft is not None and rl is not None else None,
        out_of_family=apart,
        episodes=int(rl["episodes"]) if rl else 0,
    )


def final_vs(evals: list[Record], other: list[Record]) -> Paired | None:
    """A run's final evaluation against another run's, on the same held-out instances (e.g. IPA against
    GRPO at equal budget); None unless both have one over the same instances."""
    mine, theirs = _by_label(evals).get("after RL"), _by_label(other).get("after RL")
    if mine is None or theirs is None or set(mine["seed_rewards"]) != set(theirs["seed_rewards"]):
        return None
    return paired(theirs, mine)


@dataclass(frozen=True)
class Verdict:
    """Over a config's seeds: how many runs gained significantly (RL > SFT, p < alpha, more won than lost),
    the mean gain in points over every run that finished (a run that did not gain counts too), its spread
    (the sample standard deviation over those runs, None below two; the smallest and largest gain), and in
    how many runs SFT solved more held-out instances than the base model."""

    runs: int
    finished: int
    significant: int
    mean_points: float | None
    points_sd: float | None
    min_points: float | None
    max_points: float | None
    sft_above_base: int


def verdict(rows: list[RunRow], alpha: float = 0.05) -> Verdict:
    done = [row.rl_vs_sft for row in rows if row.rl_vs_sft is not None]
    significant = sum(1 for p in done if p.p < alpha and p.gained > p.lost)
    points = [p.points for p in done]
    mean = statistics.fmean(points) if points else None
    above = sum(
        1 for row in rows if row.sft_vs_base is not None and row.sft_vs_base.after > row.sft_vs_base.before
    )
    return Verdict(
        runs=len(rows),
        finished=len(done),
        significant=significant,
        mean_points=mean,
        points_sd=statistics.stdev(points) if len(points) > 1 else None,
        min_points=min(points, default=None),
        max_points=max(points, default=None),
        sft_above_base=above,
    )
