"""The main job, configs/ipa.yaml, as CI runs it: the same file at a small size with the scripted engine (it
follows each task's oracle) and the tiny model. The data stage generates, validates, collects, filters and
exports; SFT warm-starts; the SFT and RL models are evaluated on the held-out instances (the base model only
where benchmarks/learning.py asks for it); 2 RL steps."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from roll.config import validate_config
from roll.pipeline.config import TrainConfig

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TINY = "builtin:tiny-qwen3-moe"


def recipe_at_ci_size(path: str, tmp_path: Path) -> dict[str, Any]:
    config = yaml.safe_load(Path(path).read_text())
    config.update(name="recipe-ci", output_dir=str(tmp_path / "run"), steps=2)
    config["trainer"].update(model=TINY)
    config["engines"]["engine"] = {"type": "scripted"}
    config["env"]["data"].update(
        families={"file-ops": {"level": 1}}, train_per_family=2, eval_per_family=2, attempts=1, concurrency=2
    )
    config["env"]["rock"]["slots"] = 2
    config["rollout"].update(episodes_in_flight=2, group_size=2, groups_per_step=2)
    config["resources"] = {
        "trainer_cpus": 0.25,
        "engine_cpus": 0.25,
        "trainer_threads": 1,
        "engine_threads": 1,
    }
    config["warm_start"]["overrides"] = [
        f"trainer.model={TINY}",
        "max_steps=1",
        "trainer.schedule.total_steps=1",
        f"output_dir={tmp_path / 'sft'}",
    ]
    return config


@pytest.mark.parametrize("path", ["configs/ipa.yaml"])
def test_the_main_job_runs_end_to_end_at_ci_size(
    path: str, ray_session: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from roll.pipeline.controller import train

    monkeypatch.setenv("ALE_HOME", str(tmp_path / "ale"))
    config = validate_config(TrainConfig, recipe_at_ci_size(path, tmp_path))
    out = io.StringIO()
    train(config, Console(file=out, width=100))
    printed = out.getvalue()
    assert "data: validated 6 instances" in printed
    assert "data: 2 train, 2 held-out and 2 out-of-family instances" in printed
    run_dir = tmp_path / "run"
    recorded = json.loads((run_dir / "config.json").read_text())["env"]
    assert recorded["task_ids"] == ["file-ops-0", "file-ops-1"]
    assert recorded["eval_task_ids"] == ["file-ops-100000", "file-ops-100001"]
    apart = recorded["out_of_family_task_ids"]  # the config's line-filter, never trained on
    assert len(apart) == 2 and all(task.startswith("line-filter-") for task in apart)
    assert (tmp_path / "sft" / "model" / "config.json").is_file()
    evals = [json.loads(line) for line in (run_dir / "eval.jsonl").read_text().splitlines()]
    assert [(e["label"], e["episodes"], e["failed"]) for e in evals] == [
        ("after SFT", 2, 0),
        ("after RL", 2, 0),
    ]
    for record in evals:  # the scripted engine follows the oracle when greedy
        assert sorted(record["won_seeds"]) == ["file-ops-100000@0", "file-ops-100001@0"]
        assert sorted(record["out_of_family"]["won_seeds"]) == sorted(f"{task}@0" for task in apart)
    steps = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2] and all(s["train/loss_tokens"] > 0 for s in steps)
    assert (run_dir / "model" / "config.json").is_file()
