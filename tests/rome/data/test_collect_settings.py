"""One schema for collection: `rome data collect`'s options are CollectSettings' fields, and the data recipe
(env.data) shares them by name, with the prompt its run's agent is shown."""

from __future__ import annotations

from pathlib import Path

import typer.main

from roll.rollout.terminal.config import (
    CollectSettings,
    TerminalAgentConfig,
    TerminalDataConfig,
)
from rome.data.cli import app

DATA = {"families": {"numeric": {"level": 1}}, "train_per_family": 2, "eval_per_family": 1}


def test_the_recipe_hands_its_collect_knobs_over_by_name() -> None:
    data = TerminalDataConfig(**DATA, attempts=3, mistake_rate=0.5, max_turns=7, concurrency=5)
    agent = TerminalAgentConfig(
        prompt_profile="compact", environment_date="2030-01-01", environment_os="Linux 7"
    )
    settings = data.collect_settings(agent)
    assert settings == CollectSettings(
        agent="oracle-teacher",
        attempts=3,
        mistake_rate=0.5,
        max_turns=7,
        concurrency=5,
        prompt_profile="compact",
        environment_date="2030-01-01",
        environment_os="Linux 7",
    )
    # Same meaning, bounds and description; only the default differs (the stage collects to train on it).
    for name in ("attempts", "mistake_rate", "max_turns", "concurrency"):
        shared, own = CollectSettings.model_fields[name], TerminalDataConfig.model_fields[name]
        assert (own.description, own.metadata) == (shared.description, shared.metadata)


def test_every_collect_setting_is_an_option_of_rome_data_collect() -> None:
    command = typer.main.get_command(app).commands["collect"]  # type: ignore[attr-defined]
    options = {param.name: param for param in command.params}
    for name, field in CollectSettings.model_fields.items():
        assert name in options, f"rome data collect has no --{name.replace('_', '-')}"
        assert options[name].help == field.description
    assert options["attempts"].default == 1 and options["max_turns"].default == 30


def test_a_value_the_model_refuses_names_its_option(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, ["collect", str(tmp_path), "--out", "x.jsonl", "--agent-timeout-s", "0"])
    assert result.exit_code == 2 and "--agent-timeout-s: Input should be greater than 0" in result.output
