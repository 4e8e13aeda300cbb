"""`roll`: the ROLL command line. Heavy imports happen inside commands so `roll --help` is instant."""

from __future__ import annotations

import typer

from roll.pipeline.cli import plot, train
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


# These modules import only typer at the top, so `roll --help` stays instant.
app.command("train")(train)
app.command("plot")(plot)
app.command("sft")(sft)
app.command("view")(view)
app.add_typer(players_app, name="players")


if __name__ == "__main__":
    app()
