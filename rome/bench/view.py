"""`rome-bench view RUN_DIR`: a benchmark run in the same static viewer as `roll view`: pass@k by domain and
task, each trial's verdict (colored by class) opening its ATIF transcript (agent/trajectory.json), and the
verdicts with their causes."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from iflow.atif import AtifError, read_trajectory
from rome.bench.atif import trajectory_path
from rome.bench.runner import load_finished
from rome.bench.scoring import summarize
from rome.bench.trial import TrialResult


class BenchViewError(ValueError):
    """A folder that holds no benchmark run; the message says what to pass."""


def _bars(
    title: str, labels: list[str], values: list[float], xlabel: str, notes: list[str]
) -> dict[str, Any]:
    positions = list(range(len(labels)))
    return {
        "title": title,
        "xlabel": xlabel,
        "ticks": labels,
        "bars": True,
        "series": [{"label": title, "x": positions, "y": values}],
        "notes": [{"text": n, "x": p, "y": v} for n, p, v in zip(notes, positions, values, strict=True)],
    }


def _pass_at_k_by_domain(summary: Any) -> dict[str, Any]:
    domains = list(summary.by_category)
    ks = sorted({k for group in summary.by_category.values() for k in group.pass_at_k})
    return {
        "title": "pass@k by domain",
        "xlabel": "domain",
        "ticks": domains,
        "bars": True,
        "series": [
            {
                "label": f"pass@{k}",
                "x": list(range(len(domains))),
                "y": [summary.by_category[d].pass_at_k.get(k) for d in domains],
            }
            for k in ks
        ],
        "notes": [],
    }


def bench_view(run_dir: Path) -> dict[str, Any]:
    trials = sorted(load_finished(run_dir).values(), key=lambda t: (t.task_id, t.attempt))
    if not trials:
        raise BenchViewError(
            f"{run_dir} holds no trial results (trials/): pass a folder written by `rome-bench terminal-pro`"
        )
    summary = summarize(t.model_dump() for t in trials)
    episodes: dict[str, dict[str, Any]] = {}
    for trial in trials:
        path = trajectory_path(run_dir, trial.task_id, trial.attempt)
        if path.is_file():
            try:
                episodes[str(path.relative_to(run_dir))] = read_trajectory(path).to_json_dict()
            except AtifError as error:
                raise BenchViewError(f"{error}; rewrite or remove that file") from error
    scores = summary.tasks
    panels = [
        _pass_at_k_by_domain(summary),
        _bars(
            "pass rate by task",
            [s.task_id for s in scores],
            [s.successes / s.n for s in scores],
            "task",
            [f"{s.successes}/{s.n}" for s in scores],
        ),
        _bars(
            "verdicts",
            list(summary.verdicts),
            [float(v) for v in summary.verdicts.values()],
            "verdict",
            [str(v) for v in summary.verdicts.values()],
        ),
    ]
    return {
        "kind": "bench",
        "title": f"rome-bench run {run_dir.name}",
        "source": str(run_dir.resolve()),
        "summary_line": (
            f"{summary.overall.tasks} tasks, {summary.overall.trials} judged trials: pass@1 "
            f"{summary.overall.pass_at_1:.3f}, avg@k {summary.overall.avg_at_k:.3f}; "
            + ", ".join(f"pass@{k} {v:.3f}" for k, v in summary.overall.pass_at_k.items())
        ),
        "panels": panels,
        "trials": _trials_table(run_dir, trials, episodes),
        "verdicts": [
            {"verdict": verdict, "cause": cause, "count": count}
            for (verdict, cause), count in sorted(
                Counter((t.verdict, t.cause) for t in trials).items(), key=str
            )
        ],
        "episodes": episodes,
    }


def _trials_table(run_dir: Path, trials: list[TrialResult], episodes: dict[str, Any]) -> dict[str, Any]:
    attempts = sorted({t.attempt for t in trials})
    by_task: dict[str, dict[int, TrialResult]] = {}
    for trial in trials:
        by_task.setdefault(trial.task_id, {})[trial.attempt] = trial
    rows = []
    for task, tried in by_task.items():
        first = next(iter(tried.values()))
        cells = []
        for attempt in attempts:
            trial = tried.get(attempt)
            if trial is None:
                cells.append(None)
                continue
            episode = str(trajectory_path(run_dir, task, attempt).relative_to(run_dir))
            cells.append(
                {
                    "verdict": trial.verdict,
                    "cause": trial.cause,
                    "reward": trial.reward,
                    "episode": episode if episode in episodes else None,
                }
            )
        rows.append({"task": task, "domain": first.category, "difficulty": first.difficulty, "cells": cells})
    return {"attempts": attempts, "rows": rows}
