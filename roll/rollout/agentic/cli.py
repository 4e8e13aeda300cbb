"""`roll agentic CONFIG [key.sub=value ...]`: IPA on terminal tasks with initialized resampling (evaluate,
train in rounds, evaluate again). Register with `app.command("agentic")(agentic_train)` in roll/cli.py;
this module imports only typer at the top so `roll --help` stays instant."""

from __future__ import annotations

from pathlib import Path

import typer


def agentic_train(
    config: Path = typer.Argument(..., help="YAML config, e.g. configs/ipa_terminal.yaml."),
    overrides: list[str] | None = typer.Argument(
        None, help="Overrides as key.sub=value, e.g. rounds=0 (evaluate only) task_ids=[fix-permissions]."
    ),
) -> None:
    """Agent-native IPA on terminal tasks: success by resampling start point before and after training;
    report.json under the config's `output`."""
    from rich.console import Console

    from roll.config import ConfigError, load_config
    from roll.rollout.agentic.config import IPATerminalConfig

    console = Console(stderr=True)
    try:
        parsed = load_config(IPATerminalConfig, config, overrides or [])
    except ConfigError as error:
        console.print(f"[red]{error}[/red]")
        raise typer.Exit(2) from error
    from roll.rollout.agentic.ipa import run

    run(parsed)
