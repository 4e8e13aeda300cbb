"""`roll train CONFIG [key.sub=value ...]` and `roll plot RUN_DIR`: registered in roll/cli.py."""

from __future__ import annotations

from pathlib import Path

import typer


def train(
    config: Path = typer.Argument(..., help="YAML config, e.g. configs/ipa.yaml."),
    overrides: list[str] | None = typer.Argument(
        None, help="Overrides as key.sub=value, e.g. steps=4 async_ratio=0 resume=true."
    ),
) -> None:
    """RL training on Ray: async rollout, sample buffer, weight sync; results under runs/<name>/."""
    from rich.console import Console

    from roll.config import ConfigError, load_config
    from roll.pipeline.config import TrainConfig

    console = Console(stderr=True)
    try:
        parsed = load_config(TrainConfig, config, overrides or [])
    except ConfigError as error:
        console.print(f"[red]{error}[/red]")
        raise typer.Exit(2) from error
    from rich.markup import escape

    from roll.pipeline.buffer import RolloutFailing
    from roll.pipeline.controller import WarmStartError
    from roll.pipeline.controller import train as run_training
    from roll.pipeline.tracking import ResumeError
    from roll.rollout.envs import env_errors

    expected = (WarmStartError, ResumeError, RolloutFailing, *env_errors())
    try:
        run_training(parsed, console)
    except expected as error:
        # Raised in the buffer actor, a RolloutFailing arrives wrapped by Ray; its cause holds the message.
        console.print(f"[red]{escape(str(getattr(error, 'cause', None) or error))}[/red]")
        raise typer.Exit(1) from error


def plot(
    run_dir: Path = typer.Argument(..., help="A run folder, e.g. runs/ipa."),
    output: Path | None = typer.Option(None, help="PNG file (default RUN_DIR/curves.png)."),
) -> None:
    """Draw a run's curves (reward, success, eval success, lengths, IS/mask stats, throughput; terminal
    runs also success by start point k and failed episodes per step) as PNG."""
    from rich.console import Console

    from roll.plot import PlotError, plot_run

    console = Console(stderr=True)
    try:
        path = plot_run(run_dir, output)
    except PlotError as error:
        console.print(f"[red]{error}[/red]")
        raise typer.Exit(2) from error
    console.print(f"Wrote {path}")
