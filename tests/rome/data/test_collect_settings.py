"""One schema for collection: `rome data collect`'s options are CollectSettings' fields, the data recipe
(env.data) shares them by name, and the recipe's cache key stays what format 2 made for an unchanged
recipe."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import typer.main

from roll.rollout.terminal.config import CollectSettings, TerminalDataConfig, TerminalEnvConfig
from rome.data import recipe
from rome.data.cli import app

DATA = {"families": {"numeric": {"level": 1}}, "train_per_family": 2, "eval_per_family": 1}


def _format_2_key(env: TerminalEnvConfig) -> str:
    """dataset_key as format 2 computed it, before max_turns, rl_per_family and balance_train were recipe
    fields."""
    assert env.data is not None
    planned = recipe.planned_instances(env.data)
    identity = {
        "format": "rome-data-recipe/2",
        "data": env.data.model_dump(
            mode="json", exclude={"concurrency", "max_turns", "rl_per_family", "balance_train"}
        ),
        "prompt_profile": env.agent.prompt_profile,
        "instances": [f"{task_id}:{side}:{d}" for task_id, (side, d) in planned.items()],
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


def _key(env: TerminalEnvConfig) -> str:
    assert env.data is not None
    return recipe.dataset_key(env, recipe.planned_instances(env.data))


def test_an_unchanged_recipe_keeps_its_cached_folder() -> None:
    env = TerminalEnvConfig(data=DATA)
    assert recipe.RECIPE_FORMAT == "rome-data-recipe/2"
    assert _key(env) == _format_2_key(env)
    assert _key(TerminalEnvConfig(data={**DATA, "max_turns": 12})) != _key(env)
    assert _key(TerminalEnvConfig(data={**DATA, "rl_per_family": 1})) != _key(env)
    assert _key(TerminalEnvConfig(data={**DATA, "balance_train": True})) != _key(env)


def test_the_recipe_hands_its_collect_knobs_over_by_name() -> None:
    data = TerminalDataConfig(**DATA, attempts=3, mistake_rate=0.5, max_turns=7, concurrency=5)
    settings = data.collect_settings("compact")
    assert settings == CollectSettings(
        agent="oracle-teacher",
        attempts=3,
        mistake_rate=0.5,
        max_turns=7,
        concurrency=5,
        prompt_profile="compact",
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
