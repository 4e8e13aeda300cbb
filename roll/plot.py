"""`roll plot runs/<name>`: a run's curves as one PNG (matplotlib, no display needed).

What is drawn is decided by `panels` (plain data, tested exactly); `plot_run` only draws it. A terminal run
(env.type: terminal) adds success by start point k (k expert steps prefilled) in training and across
evaluations, or held-out success per evaluation, and the episodes that failed per step.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Record = dict[str, Any]

PANELS: list[tuple[str, str, list[tuple[str, str]]]] = [
    ("metrics", "reward", [("reward", "train reward")]),
    ("metrics", "success", [("success", "train success")]),
    ("eval", "eval success", [("success", "eval success")]),
    ("metrics", "lengths", [("turns", "turns / episode"), ("output_tokens", "output tokens / episode")]),
    (
        "metrics",
        "IS ratio and mask",
        [
            ("train/is_ratio/mean", "IS ratio (mean)"),
            ("train/mismatch_ratio/mean", "mismatch ratio (mean)"),
            ("train/masked_fraction/mean", "masked fraction"),
            ("train/clip_fraction/mean", "clip fraction"),
        ],
    ),
    ("metrics", "throughput", [("samples_per_s", "samples/s")]),
    (
        "metrics",
        "time per step (s)",
        [("time_rollout_s", "rollout wait"), ("time_train_s", "train"), ("time_sync_s", "weight sync")],
    ),
    ("metrics", "staleness", [("staleness_mean", "mean"), ("staleness_max", "max")]),
]
FAILURES = [
    ("buffer/infra_failed_step", "infrastructure failures"),
    ("agent_timeouts", "agent timeouts"),
    ("agent_errors", "agent errors"),
]
TRAIN_BY_START = "success_by_start/"


@dataclass
class Series:
    label: str
    x: list[float]
    y: list[float]


@dataclass
class Panel:
    title: str
    series: list[Series]
    xlabel: str = "step"
    ticks: list[str] | None = None  # names of the x positions 0..n-1 (evaluations, in order)
    bars: bool = False
    legend: bool = False  # names the series (shown once something is drawn)
    notes: list[tuple[str, float, float]] = field(default_factory=list)  # (text, x, y)


class PlotError(ValueError):
    """A folder that holds no run to draw; the message says what is expected."""


def _read(path: Path) -> list[Record]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _series(records: list[Record], key: str, label: str) -> Series | None:
    points = [(r["step"], r[key]) for r in records if isinstance(r.get(key), int | float)]
    if not points:
        return None
    return Series(label, [step for step, _ in points], [value for _, value in points])


def _eval_notes(evals: list[Record]) -> list[tuple[str, float, float]]:
    """Each eval point's label and success (base and after SFT share step 0: drawn stacked there)."""
    return [
        (f"{row['label']} {row['success']:.0%}", row["step"], row["success"])
        for row in evals
        if isinstance(row.get("success"), int | float)
    ]


def panels(metrics: list[Record], evals: list[Record], env: Record) -> list[Panel]:
    """The panels of a run's figure. `env`: the run's env config (config.json), {} when unknown; a
    terminal run is one whose env.type says so or whose records have success by start point."""
    out = []
    for source, title, keys in PANELS:
        records = metrics if source == "metrics" else evals
        series = [s for key, label in keys if (s := _series(records, key, label))]
        notes = _eval_notes(evals) if source == "eval" else []
        out.append(Panel(title, series, legend=len(keys) > 1, notes=notes))
    terminal = (
        env.get("type") == "terminal"
        or any(key.startswith(TRAIN_BY_START) for r in metrics for key in r)
        or any("by_start" in row for row in evals)
    )
    if not terminal:
        return out
    out.append(train_by_start(metrics))
    played = [row for row in evals if row.get("episodes")]
    out.append(
        held_out(played, len(env["eval_task_ids"])) if env.get("eval_task_ids") else eval_by_start(played)
    )
    if env.get("out_of_family_task_ids"):
        apart = [
            {**row["out_of_family"], "label": row["label"]}
            for row in played
            if row.get("out_of_family", {}).get("episodes")
        ]
        out.append(held_out(apart, len(env["out_of_family_task_ids"]), "out-of-family"))
    failures = [s for key, label in FAILURES if (s := _series(metrics, key, label))]
    out.append(Panel("failed episodes per step", failures, legend=True))
    return out


def train_by_start(metrics: list[Record]) -> Panel:
    """Training success per step, one line per start point k that the step's batch started from."""
    starts = sorted(
        {int(key[len(TRAIN_BY_START) :]) for r in metrics for key in r if key.startswith(TRAIN_BY_START)}
    )
    series = [s for k in starts if (s := _series(metrics, f"{TRAIN_BY_START}{k}", f"k={k}"))]
    return Panel("train success by start point k", series, legend=True)


def eval_by_start(played: list[Record]) -> Panel:
    """Eval success across evaluations, one line per start point k (the mean over the tasks played at k)."""
    rates: dict[int, list[tuple[int, float]]] = {}
    for position, row in enumerate(played):
        at_start: dict[int, list[float]] = {}
        for task_rates in row.get("by_start", {}).values():
            for k, rate in task_rates.items():
                at_start.setdefault(int(k), []).append(rate)
        for k, values in at_start.items():
            rates.setdefault(k, []).append((position, statistics.fmean(values)))
    series = [
        Series(f"k={k}", [p for p, _ in points], [rate for _, rate in points])
        for k, points in sorted(rates.items())
    ]
    ticks = [row["label"] for row in played]
    return Panel("eval success by start point k", series, xlabel="evaluation", ticks=ticks, legend=True)


def held_out(played: list[Record], tasks: int, which: str = "held-out") -> Panel:
    """Held-out success per evaluation (base, after SFT, after RL, ...), each bar marked won/played; `which`
    names the set (the in-family held-out set, or the out-of-family one)."""
    positions = list(range(len(played)))
    success = [row["success"] for row in played]
    notes = [
        (f"{round(row['success'] * row['episodes'])}/{row['episodes']}", p, row["success"])
        for p, row in zip(positions, played, strict=True)
    ]
    return Panel(
        f"{which} success ({tasks} tasks)",
        [Series(f"{which} success", positions, success)] if played else [],
        xlabel="evaluation",
        ticks=[row["label"] for row in played],
        bars=True,
        notes=notes,
    )


def run_panels(run_dir: Path) -> list[Panel]:
    """The panels of the run in `run_dir` (its metrics.jsonl, eval.jsonl and config.json)."""
    metrics, evals = _read(run_dir / "metrics.jsonl"), _read(run_dir / "eval.jsonl")
    if not metrics and not evals:
        raise PlotError(
            f"{run_dir} has no metrics.jsonl or eval.jsonl: "
            "pass a folder written by `roll train`, e.g. runs/ipa"
        )
    config = run_dir / "config.json"
    env = json.loads(config.read_text()).get("env", {}) if config.is_file() else {}
    return panels(metrics, evals, env)


def plot_run(run_dir: Path, output: Path | None = None) -> Path:
    """Draw the run in `run_dir` into one PNG; returns its path."""
    drawn = run_panels(run_dir)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = 4
    rows = -(-len(drawn) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.2 * rows), squeeze=False)
    for axis, panel in zip(axes.flat, drawn, strict=False):
        _draw(axis, panel)
    for axis in list(axes.flat)[len(drawn) :]:
        axis.set_visible(False)
    figure.suptitle(str(run_dir))
    figure.tight_layout()
    path = output or run_dir / "curves.png"
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def _draw(axis: Any, panel: Panel) -> None:
    for series in panel.series:
        if panel.bars:
            axis.bar(series.x, series.y, label=series.label)
        else:
            axis.plot(series.x, series.y, marker="o", markersize=3, label=series.label)
    stacked: dict[float, int] = {}
    for text, x, y in panel.notes:
        offset = stacked.get(x, 0)
        stacked[x] = offset + 1
        axis.annotate(text, (x, y), textcoords="offset points", xytext=(4, 4 - 10 * offset), fontsize=7)
    if panel.ticks is not None:
        axis.set_xticks(range(len(panel.ticks)), panel.ticks, rotation=20, fontsize=7)
    axis.set_title(panel.title)
    axis.set_xlabel(panel.xlabel)
    axis.grid(alpha=0.3)
    if panel.legend and panel.series:
        axis.legend(fontsize=7)
