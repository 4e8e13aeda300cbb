"""`roll plot`: which panels and series a run's figure gets, from hand-written run folders."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from roll.plot import PANELS, Panel, PlotError, Series, plot_run, run_panels

GEM_TITLES = [title for _, title, _ in PANELS]


def write_run(
    run_dir: Path, metrics: list[dict[str, Any]], evals: list[dict[str, Any]], env: dict[str, Any]
) -> Path:
    run_dir.mkdir()
    for name, rows in (("metrics.jsonl", metrics), ("eval.jsonl", evals)):
        (run_dir / name).write_text("".join(json.dumps(row) + "\n" for row in rows))
    (run_dir / "config.json").write_text(json.dumps({"name": run_dir.name, "env": env}))
    return run_dir


def by_title(panels: list[Panel]) -> dict[str, Panel]:
    return {panel.title: panel for panel in panels}


def test_a_gem_run_keeps_its_panels(tmp_path: Path) -> None:
    metrics = [{"step": s, "reward": 0.1 * s, "success": 0.5, "buffer/infra_failed_step": 0} for s in (1, 2)]
    evals = [{"step": 0, "label": "before RL", "episodes": 4, "success": 0.25}]
    panels = run_panels(write_run(tmp_path / "gem", metrics, evals, {"type": "gem", "env_id": "game:x"}))
    assert [panel.title for panel in panels] == GEM_TITLES
    assert by_title(panels)["reward"].series == [Series("train reward", [1, 2], [0.1, 0.2])]
    assert by_title(panels)["eval success"].notes == [("before RL 25%", 0, 0.25)]


def test_a_terminal_run_shows_success_by_start_point_and_failures(tmp_path: Path) -> None:
    metrics = [
        {
            "step": 1,
            "success": 0.4,
            "success_by_start/0": 0.25,
            "success_by_start/2": 1.0,
            "buffer/infra_failed_step": 1,
            "agent_timeouts": 2,
            "agent_errors": 0,
        },
        {
            "step": 2,
            "success": 0.5,
            "success_by_start/0": 0.5,
            "buffer/infra_failed_step": 0,
            "agent_timeouts": 0,
        },
    ]
    evals = [
        {
            "step": 0,
            "label": "before RL",
            "episodes": 4,
            "success": 0.5,
            "by_start": {"a": {"0": 0.0, "1": 1.0}, "b": {"0": 0.5}},
        },
        {"step": 1, "label": "step 1", "episodes": 0, "failed": 4},  # nothing played: left out
        {
            "step": 2,
            "label": "after RL",
            "episodes": 4,
            "success": 0.75,
            "by_start": {"a": {"0": 1.0, "1": 1.0}, "b": {"0": 0.0}},
        },
    ]
    panels = run_panels(
        write_run(tmp_path / "terminal", metrics, evals, {"type": "terminal", "eval_task_ids": []})
    )
    titles = [panel.title for panel in panels]
    assert titles == [
        *GEM_TITLES,
        "train success by start point k",
        "eval success by start point k",
        "failed episodes per step",
    ]
    panel = by_title(panels)
    assert panel["train success by start point k"].series == [
        Series("k=0", [1, 2], [0.25, 0.5]),
        Series("k=2", [1], [1.0]),
    ]
    evaluated = panel["eval success by start point k"]
    assert evaluated.ticks == ["before RL", "after RL"]
    # k=0 is the mean over tasks a and b: (0.0 + 0.5) / 2, then (1.0 + 0.0) / 2
    assert evaluated.series == [Series("k=0", [0, 1], [0.25, 0.5]), Series("k=1", [0, 1], [1.0, 1.0])]
    assert panel["failed episodes per step"].series == [
        Series("infrastructure failures", [1, 2], [1, 0]),
        Series("agent timeouts", [1, 2], [2, 0]),
        Series("agent errors", [1], [0]),
    ]


def test_a_held_out_run_shows_success_per_evaluation(tmp_path: Path) -> None:
    def held_out(step: int, label: str, won: int) -> dict[str, Any]:
        by_start = {"x": {"0": float(won >= 1)}, "y": {"0": float(won >= 2)}}
        return {"step": step, "label": label, "episodes": 2, "success": won / 2, "by_start": by_start}

    evals = [held_out(0, "base", 0), held_out(0, "after SFT", 1), held_out(3, "after RL", 2)]
    env = {"type": "terminal", "eval_task_ids": ["x", "y"]}
    panels = run_panels(write_run(tmp_path / "held", [{"step": 1, "success": 0.5}], evals, env))
    assert "eval success by start point k" not in by_title(panels)
    panel = by_title(panels)["held-out success (2 tasks)"]
    assert panel.bars and panel.ticks == ["base", "after SFT", "after RL"]
    assert panel.series == [Series("held-out success", [0, 1, 2], [0.0, 0.5, 1.0])]
    assert panel.notes == [("0/2", 0, 0.0), ("1/2", 1, 0.5), ("2/2", 2, 1.0)]
    assert plot_run(tmp_path / "held").read_bytes()[:4] == b"\x89PNG"


def test_the_out_of_family_set_gets_its_own_panel(tmp_path: Path) -> None:
    def record(label: str, won: int, other: int) -> dict[str, Any]:
        apart = {"episodes": 2, "success": other / 2}
        return {"step": 0, "label": label, "episodes": 4, "success": won / 4, "out_of_family": apart}

    evals = [record("after SFT", 1, 0), record("after RL", 3, 1)]
    env = {"type": "terminal", "eval_task_ids": ["a", "b", "c", "d"], "out_of_family_task_ids": ["x", "y"]}
    panels = by_title(run_panels(write_run(tmp_path / "apart", [{"step": 1, "success": 0.5}], evals, env)))
    assert panels["held-out success (4 tasks)"].series == [Series("held-out success", [0, 1], [0.25, 0.75])]
    apart = panels["out-of-family success (2 tasks)"]
    assert apart.series == [Series("out-of-family success", [0, 1], [0.0, 0.5])]
    assert apart.notes == [("0/2", 0, 0.0), ("1/2", 1, 0.5)]


def test_a_folder_without_logs_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PlotError, match=r"has no metrics\.jsonl or eval\.jsonl"):
        run_panels(tmp_path)
