"""`roll plot runs/<name>`: a run's curves as one PNG (matplotlib, no display needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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


class PlotError(ValueError):
    """A folder that holds no run to draw; the message says what is expected."""


def _read(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def plot_run(run_dir: Path, output: Path | None = None) -> Path:
    """Draw metrics.jsonl and eval.jsonl of `run_dir` into one PNG; returns its path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = {"metrics": _read(run_dir / "metrics.jsonl"), "eval": _read(run_dir / "eval.jsonl")}
    if not records["metrics"] and not records["eval"]:
        raise PlotError(
            f"{run_dir} has no metrics.jsonl or eval.jsonl: "
            "pass a folder written by `roll train`, e.g. runs/ipa"
        )
    columns = 4
    rows = -(-len(PANELS) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.2 * rows), squeeze=False)
    for axis, (source, title, series) in zip(axes.flat, PANELS, strict=False):
        for key, label in series:
            points = [(r["step"], r[key]) for r in records[source] if isinstance(r.get(key), int | float)]
            if points:
                steps, values = zip(*points, strict=True)
                axis.plot(steps, values, marker="o", markersize=3, label=label)
        if source == "eval":
            _label_evals(axis, records["eval"])
        axis.set_title(title)
        axis.set_xlabel("step")
        axis.grid(alpha=0.3)
        if len(series) > 1 and axis.lines:
            axis.legend(fontsize=7)
    for axis in list(axes.flat)[len(PANELS) :]:
        axis.set_visible(False)
    figure.suptitle(str(run_dir))
    figure.tight_layout()
    path = output or run_dir / "curves.png"
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def _label_evals(axis: Any, evals: list[dict[str, Any]]) -> None:
    """Name each eval point (base and after SFT share step 0, so their labels are stacked)."""
    at_step: dict[int, int] = {}
    for row in evals:
        if not isinstance(row.get("success"), int | float):
            continue
        offset = at_step.get(row["step"], 0)
        at_step[row["step"]] = offset + 1
        axis.annotate(
            f"{row['label']} {row['success']:.0%}",
            (row["step"], row["success"]),
            textcoords="offset points",
            xytext=(4, 4 - 10 * offset),
            fontsize=7,
        )
