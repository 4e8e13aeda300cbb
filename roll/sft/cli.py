"""`roll sft CONFIG [key.sub=value ...]`: registered in roll/cli.py as `app.command("sft")(sft)`."""

from __future__ import annotations

from pathlib import Path

import typer


def sft(
    config: Path = typer.Argument(..., help="YAML config, e.g. configs/sft.yaml."),
    overrides: list[str] | None = typer.Argument(
        None, help="Overrides as key.sub=value, e.g. trainer.optimizer.lr=1e-5 max_steps=10."
    ),
) -> None:
    """Error-masked SFT on JSONL agent trajectories (checkpoints, metrics.jsonl, TensorBoard)."""
    from rich.console import Console

    from roll.config import ConfigError, load_config
    from roll.sft.config import SFTConfig
    from roll.sft.data import SFTDataError

    console = Console(stderr=True)
    try:
        parsed = load_config(SFTConfig, config, overrides or [])
    except ConfigError as error:
        console.print(f"[red]{error}[/red]")
        raise typer.Exit(2) from error
    from roll.sft.train import run_sft

    try:
        last = run_sft(parsed, console)
    except SFTDataError as error:
        console.print(f"[red]{error}[/red]")
        raise typer.Exit(2) from error
    loss = last.get("loss", float("nan"))
    console.print(f"Done: step {last['step']}, loss {loss:.4f}; results in {parsed.output_dir}")
