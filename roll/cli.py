"""`roll`: the ROLL command line. Heavy imports happen inside commands so `roll --help` is instant."""

from __future__ import annotations

from pathlib import Path

import typer

from roll.rollout.players.cli import app as players_app
from roll.sft.cli import sft
from roll.view.cli import view

app = typer.Typer(
    name="roll", help="ROLL: RL training for agents, and its inference server.", no_args_is_help=True
)


@app.callback()
def main() -> None:
    """ROLL: RL training for agents, and its inference server."""


@app.command()
def serve(
    model: str = typer.Option(
        ...,
        "--model",
        "-m",
        help="builtin:smollm2-135m-instruct, builtin:tiny-qwen3-moe or a model folder.",
    ),
    host: str = typer.Option("127.0.0.1", help="Address to listen on."),
    port: int = typer.Option(8000, help="Port to listen on."),
    device: str = typer.Option("cpu", help="Torch device of the model, e.g. cpu or cuda."),
    max_batch_size: int = typer.Option(64, help="Most completions decoded together in one step."),
) -> None:
    """Serve MODEL with the embedded torch engine behind an OpenAI-compatible API."""
    import uvicorn
    from rich.console import Console

    from roll.engine.server import create_app
    from roll.engine.torch_engine import TorchEngine, TorchEngineConfig
    from roll.models import ModelNotFoundError, load_model

    console = Console(stderr=True)
    try:
        loaded = load_model(model, device=device)
    except (ModelNotFoundError, FileNotFoundError) as error:
        console.print(f"[red]{error}[/red]")
        raise typer.Exit(2) from error
    engine = TorchEngine(loaded, TorchEngineConfig(max_batch_size=max_batch_size))
    console.print(f"Serving [bold]{loaded.model_id}[/bold] at http://{host}:{port}/v1")
    uvicorn.run(create_app(engine, loaded), host=host, port=port, log_level="info")


@app.command()
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


@app.command()
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


# These modules import only typer at the top, so `roll --help` stays instant.
app.command("sft")(sft)
app.command("view")(view)
app.add_typer(players_app, name="players")


if __name__ == "__main__":
    app()
