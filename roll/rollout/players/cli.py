"""`roll players generate|eval`: scripted players' games as SFT warm-start data; a quick success measurement.

Registered in roll/cli.py as `app.add_typer(players_app, name="players")`.
"""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(
    help="Scripted players: SFT warm-start data, and eval success of a model.", no_args_is_help=True
)

TARGET_HELP = "A `roll train` config (its env section: env id, system prompt, limits) or a GEM env id."


def _env_config(target: str, overrides: list[str]) -> object:
    from pydantic import BaseModel, ConfigDict, Field

    from roll.config import load_config
    from roll.rollout.config import GEMEnvConfig
    from roll.rollout.envs import EnvConfig, default_env_config

    class EnvSection(BaseModel):
        """The `env` section of a `roll train` config; its other sections are the trainer's, not read here
        (roll.rollout does not import the pipeline's TrainConfig)."""

        model_config = ConfigDict(extra="ignore")
        env: EnvConfig = Field(default_factory=default_env_config)

    if target.endswith((".yaml", ".yml")):
        return load_config(EnvSection, target, overrides).env
    return load_config(GEMEnvConfig, None, [f"env_id={target}", *overrides])


@app.command()
def generate(
    target: str = typer.Argument(..., help=TARGET_HELP),
    out: Path = typer.Option(..., "--out", "-o", help="JSONL file to write (one conversation a line)."),
    episodes: int = typer.Option(64, min=1, help="Episodes to play (on consecutive env seeds)."),
    seed_offset: int = typer.Option(1_000_000, min=0, help="Env seed of the first episode."),
    overrides: list[str] | None = typer.Argument(None, help="Overrides of the config, e.g. env.max_turns=4."),
) -> None:
    """Play the scripted player on the real GEM env and write its winning episodes as SFT conversations."""
    from rich.console import Console

    from roll.config import ConfigError
    from roll.rollout.players.generate import generate_sft_data
    from roll.rollout.players.guess_the_number import PlayerError

    console = Console(stderr=True)
    try:
        env = _env_config(target, overrides or [])
        played = generate_sft_data(env, episodes, out, seed_offset)  # type: ignore[arg-type]
    except (ConfigError, KeyError, PlayerError) as error:
        console.print(f"[red]{error}[/red]")
        raise typer.Exit(2) from error
    won = sum(episode.success for episode in played)
    console.print(f"The scripted player won {won}/{len(played)} episodes; wrote {won} conversations to {out}")


@app.command("eval")
def evaluate(
    target: str = typer.Argument(..., help=TARGET_HELP),
    model: str = typer.Option(..., "--model", "-m", help="builtin:smollm2-135m-instruct or a model folder."),
    episodes: int = typer.Option(30, min=1, help="Episodes, on env seeds seed_offset.. (one each)."),
    seed_offset: int = typer.Option(0, min=0),
    temperature: float = typer.Option(0.0, min=0.0, help="0 is greedy."),
    max_new_tokens: int = typer.Option(32, min=1, help="Most tokens per LLM call."),
    overrides: list[str] | None = typer.Argument(None, help="Overrides of the config, e.g. env.max_turns=4."),
) -> None:
    """Eval success of MODEL on fixed seeds (the env manager on an in-process torch engine, no Ray)."""
    import asyncio
    import json
    import time

    from rich.console import Console

    from roll.config import ConfigError
    from roll.models import ModelNotFoundError
    from roll.rollout.config import SamplingConfig
    from roll.rollout.players.eval import evaluate_model

    console = Console(stderr=True)
    sampling = SamplingConfig(temperature=temperature, max_new_tokens=max_new_tokens)
    started = time.perf_counter()
    try:
        env = _env_config(target, overrides or [])
        seeds = list(range(seed_offset, seed_offset + episodes))
        result = asyncio.run(evaluate_model(model, env, sampling, seeds))  # type: ignore[arg-type]
    except (ConfigError, ModelNotFoundError, FileNotFoundError) as error:
        console.print(f"[red]{error}[/red]")
        raise typer.Exit(2) from error
    summary = {
        "model": model,
        "episodes": result.episodes,
        "wins": result.wins,
        "success_rate": result.success_rate,
        "turns": result.turns,
        "format_errors": result.format_errors,
        "temperature": temperature,
        "wall_s": round(time.perf_counter() - started, 1),
    }
    console.print(
        f"{model}: won {result.wins}/{result.episodes} ({result.success_rate:.0%}), "
        f"format errors in {result.format_errors}/{result.turns} turns"
    )
    print(json.dumps(summary))
