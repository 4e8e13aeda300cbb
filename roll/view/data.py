"""What `roll view` shows, gathered from a run folder as plain data (JSON for the page).

The curves are `roll plot`'s panels (one source of truth for what a run's figure holds) plus the loss and
the entropy; the held-out table is eval.jsonl's `seed_rewards` instance by instance, one column per
evaluation, each cell linked to its episode's ATIF file under episodes/eval/<label>/.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from iflow.atif import AtifError, read_trajectory
from roll.pipeline.episodes import FOLDER, slug
from roll.plot import Panel, PlotError, Series, run_panels

LOSS_KEYS = (("train/loss", "loss"),)
ENTROPY_PREFIX = "train/entropy"
# Chunk facts too large for a page: the token ids (kept in the ATIF files when token_ids is on).
HEAVY_CHUNK_FACTS = ("context_ids", "output_ids", "output_logprobs")


class ViewError(ValueError):
    """A folder that cannot be shown; the message says what is expected."""


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _panel_json(panel: Panel) -> dict[str, Any]:
    return {
        "title": panel.title,
        "xlabel": panel.xlabel,
        "ticks": panel.ticks,
        "bars": panel.bars,
        "series": [{"label": s.label, "x": s.x, "y": s.y} for s in panel.series],
        "notes": [{"text": t, "x": x, "y": y} for t, x, y in panel.notes],
    }


def _training_panels(metrics: list[dict[str, Any]]) -> list[Panel]:
    def series(key: str, label: str) -> Series | None:
        points = [(r["step"], r[key]) for r in metrics if isinstance(r.get(key), int | float)]
        return Series(label, [p[0] for p in points], [p[1] for p in points]) if points else None

    loss = [s for key, label in LOSS_KEYS if (s := series(key, label))]
    entropy_keys = sorted({k for r in metrics for k in r if k.startswith(ENTROPY_PREFIX)})
    entropy = [s for key in entropy_keys if (s := series(key, key.removeprefix("train/")))]
    return [Panel("loss", loss, legend=True), Panel("entropy", entropy, legend=True)]


def episode_key(document: dict[str, Any]) -> str:
    """The key eval.jsonl names an episode by (task@k, or the GEM seed), always with its #index here."""
    meta = (document.get("extra") or {}).get("metadata") or {}
    base = f"{meta['task']}@{meta['start']}" if "task" in meta and "start" in meta else str(meta.get("seed"))
    return f"{base}#{meta.get('index', 0)}"


def light_episode(document: dict[str, Any]) -> dict[str, Any]:
    """The episode as the page needs it: token ids dropped from the chunk facts and the metrics."""
    for step in document.get("steps", []):
        chunk = (step.get("extra") or {}).get("chunk")
        if chunk:
            for key in HEAVY_CHUNK_FACTS:
                chunk.pop(key, None)
        metrics = step.get("metrics")
        if metrics:
            for key in ("prompt_token_ids", "completion_token_ids", "logprobs"):
                metrics.pop(key, None)
    return document


def read_episodes(folder: Path) -> dict[str, dict[str, Any]]:
    """Every ATIF file under `folder`, by its path relative to the run's episodes folder (validated)."""
    out: dict[str, dict[str, Any]] = {}
    if not folder.is_dir():
        return out
    root = folder.parent if folder.name != FOLDER else folder
    for path in sorted(folder.rglob("*.json")):
        try:
            document = read_trajectory(path).to_json_dict()
        except AtifError as error:
            raise ViewError(f"{error}; rewrite or remove that file") from error
        out[str(path.relative_to(root))] = light_episode(document)
    return out


def held_out_table(evals: list[dict[str, Any]], episodes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Rows: instances (eval keys); columns: the evaluations that played episodes; cells: reward, won, and
    the id of the episode's file when it was kept."""
    played = [row for row in evals if row.get("seed_rewards")]
    by_label: dict[str, dict[str, str]] = {}
    for episode_id, document in episodes.items():
        extra = document.get("extra") or {}
        if extra.get("kind") == "eval":
            by_label.setdefault(slug(str(extra.get("label"))), {})[episode_key(document)] = episode_id
    rewards = [_outcomes(row)[0] for row in played]
    wins = [_outcomes(row)[1] for row in played]
    apart = {key for row in played for key in (row.get("out_of_family") or {}).get("seed_rewards", {})}
    keys = sorted({key for row_rewards in rewards for key in row_rewards}, key=lambda k: (k in apart, k))
    columns = [row["label"] for row in played]
    rows = []
    for key in keys:
        cells = []
        for row, row_rewards, row_wins in zip(played, rewards, wins, strict=True):
            reward = row_rewards.get(key)
            won = key in row_wins
            episode = by_label.get(slug(row["label"]), {}).get(key if "#" in key else f"{key}#0")
            cells.append({"reward": reward, "won": won if reward is not None else None, "episode": episode})
        rows.append({"key": key, "out_of_family": key in apart, "cells": cells})
    return {"columns": columns, "rows": rows}


def _outcomes(row: dict[str, Any]) -> tuple[dict[str, float], set[str]]:
    """An eval record's rewards and won keys, its out-of-family set (kept apart in the record) included."""
    other = row.get("out_of_family") or {}
    rewards = {**row.get("seed_rewards", {}), **other.get("seed_rewards", {})}
    won = {str(k) for k in [*row.get("won_seeds", []), *other.get("won_seeds", [])]}
    return rewards, won


def run_view(run_dir: Path) -> dict[str, Any]:
    """Everything the page of `run_dir` shows, as JSON-ready data."""
    try:
        panels = run_panels(run_dir)
    except PlotError as error:
        raise ViewError(str(error)) from error
    metrics, evals = read_jsonl(run_dir / "metrics.jsonl"), read_jsonl(run_dir / "eval.jsonl")
    panels += _training_panels(metrics)
    episodes = read_episodes(run_dir / FOLDER)
    config = run_dir / "config.json"
    return {
        "kind": "run",
        "title": f"roll run {run_dir.name}",
        "source": str(run_dir.resolve()),
        "config": json.loads(config.read_text()) if config.is_file() else {},
        "panels": [_panel_json(p) for p in panels if p.series],
        "evals": [
            {k: row.get(k) for k in ("label", "step", "success", "episodes", "failed", "model")}
            for row in evals
        ],
        "held_out": held_out_table(evals, episodes),
        "episodes": episodes,
    }
