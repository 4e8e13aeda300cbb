"""`env.data`: a terminal run that makes its own tasks and SFT data. roll reaches the ROME data pipeline only
through the `roll.terminal_data` entry point; these tests check the contract on roll's side."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from pydantic import ValidationError
from rich.console import Console

from roll.config import validate_config
from roll.pipeline.config import TrainConfig
from roll.pipeline.controller import with_prepared_data
from roll.rollout.terminal import data_stage
from roll.rollout.terminal.config import TerminalDataConfig, TerminalEnvConfig
from roll.rollout.terminal.data_stage import DataStageError, PreparedTerminalData

DATA = {"families": {"file-ops": {"level": 1}}, "train_per_family": 2, "eval_per_family": 3}


def test_tasks_are_either_named_or_generated() -> None:
    with pytest.raises(ValidationError, match=r"env\.task_ids is empty"):
        TerminalEnvConfig()
    with pytest.raises(ValidationError, match=r"env\.data generates the tasks"):
        TerminalEnvConfig(task_ids=["fix-permissions"], data=DATA)
    assert TerminalEnvConfig(data=DATA).task_ids == []


def test_held_out_seeds_may_not_overlap_the_train_seeds() -> None:
    # Held-out candidates that repeat a train instance are skipped: 2 held-out ones may draw on 100 seeds.
    with pytest.raises(
        ValidationError, match=r"train seeds 0\.\.9 and the held-out candidates' seeds 5\.\.104"
    ):
        TerminalDataConfig(families={"numeric": {}}, train_per_family=10, eval_per_family=2, eval_seed=5)
    with pytest.raises(
        ValidationError, match=r"train seeds 100\.\.109 and the held-out candidates' seeds 10\.\.109"
    ):
        TerminalDataConfig(
            families={"numeric": {}}, train_seed=100, train_per_family=10, eval_per_family=2, eval_seed=10
        )
    TerminalDataConfig(families={"numeric": {}}, train_per_family=10, eval_per_family=2, eval_seed=10)


def test_the_installed_stage_is_the_rome_data_pipeline() -> None:
    from rome.data.recipe import prepare

    assert data_stage.data_stage() is prepare


def run_config(tmp_path: Path) -> TrainConfig:
    return validate_config(
        TrainConfig,
        {
            "name": "recipe",
            "output_dir": str(tmp_path / "run"),
            "warm_start": {"sft_config": "configs/sft_terminal.yaml", "overrides": ["max_steps=1"]},
            "env": {"type": "terminal", "data": DATA},
        },
    )


def test_the_prepared_data_names_the_tasks_and_the_sft_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sft = tmp_path / "sft.jsonl"
    sft.write_text("{}\n")
    seen: list[TerminalEnvConfig] = []

    def stage(env: TerminalEnvConfig, say) -> PreparedTerminalData:  # type: ignore[no-untyped-def]
        seen.append(env)
        say("data: made")
        return PreparedTerminalData(
            folder=tmp_path,
            tasks_dir=tmp_path / "tasks",
            train_ids=["file-ops-0", "file-ops-1"],
            eval_ids=["file-ops-100000"],
            sft_path=sft,
            summary=["data: 2 train, 1 held out"],
        )

    monkeypatch.setattr(data_stage, "data_stage", lambda: stage)
    out = io.StringIO()
    config = with_prepared_data(run_config(tmp_path), Console(file=out, width=200))
    assert seen[0].data == TerminalDataConfig(**DATA)
    env = config.env
    assert isinstance(env, TerminalEnvConfig)
    assert (env.tasks_dir, env.task_ids, env.eval_task_ids, env.data) == (
        tmp_path / "tasks",
        ["file-ops-0", "file-ops-1"],
        ["file-ops-100000"],
        None,
    )
    assert config.warm_start is not None
    assert config.warm_start.overrides == ["max_steps=1", f"data.path={sft}"]
    assert out.getvalue().splitlines() == ["data: made", "data: 2 train, 1 held out"]


def test_a_stage_that_made_no_sft_data_stops_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def stage(env: TerminalEnvConfig, say) -> PreparedTerminalData:  # type: ignore[no-untyped-def]
        return PreparedTerminalData(
            folder=tmp_path, tasks_dir=tmp_path, train_ids=["a"], eval_ids=[], sft_path=tmp_path / "none"
        )

    monkeypatch.setattr(data_stage, "data_stage", lambda: stage)
    with pytest.raises(DataStageError, match="wrote no SFT data"):
        with_prepared_data(run_config(tmp_path), Console(file=io.StringIO()))


def test_the_grpo_baseline_has_the_recipes_budget() -> None:
    """configs/grpo.yaml differs from configs/ipa.yaml only in its name, its loss and its episodes starting
    from scratch: same data, SFT, steps, episodes per step, sampling and held-out eval."""
    from roll.config import load_config

    ipa, grpo = (load_config(TrainConfig, f"configs/{name}.yaml") for name in ("ipa", "grpo"))
    assert (ipa.loss.type, grpo.loss.type) == ("ipa", "grpo")
    assert isinstance(ipa.env, TerminalEnvConfig) and isinstance(grpo.env, TerminalEnvConfig)
    assert ipa.env.resampling.enabled and not grpo.env.resampling.enabled
    same = {"name", "loss", "env"}
    assert ipa.model_dump(exclude=same) == grpo.model_dump(exclude=same)
    assert ipa.env.model_dump(exclude={"resampling"}) == grpo.env.model_dump(exclude={"resampling"})


def test_data_and_expert_errors_are_one_line_before_anything_starts(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from roll.cli import app

    root = Path(__file__).resolve().parents[2]

    def train(*overrides: str) -> str:
        result = CliRunner().invoke(app, ["train", str(root / "configs" / "ipa.yaml"), *overrides])
        assert result.exit_code == 1, result.output
        assert "Traceback" not in result.output and result.exception is not None
        return " ".join(result.output.split())

    out = train("env.data.families.nosuch.level=1", f"output_dir={tmp_path}")
    assert "env.data.families: unknown family 'nosuch'" in out
    terminal = root / "configs" / "ipa_terminal.yaml"
    missing = tmp_path / "missing.jsonl"
    result = CliRunner().invoke(
        app, ["train", str(terminal), f"env.experts={missing}", f"output_dir={tmp_path}"]
    )
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"env.experts: {missing} cannot be read" in " ".join(result.output.split())
