"""`rock proxy serve`: the ModelProxyService in the foreground."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="The model proxy: agents' model endpoint, recording every call.", no_args_is_help=True)


@app.command()
def serve(
    mode: Annotated[
        str, typer.Option(help="train (engine + chunks), deploy (upstream API) or replay.")
    ] = "train",
    upstream: Annotated[
        str | None, typer.Option(help="Base URL ending in /v1: the engine (train) or the API (deploy).")
    ] = None,
    api_key: Annotated[
        str | None, typer.Option(envvar="ROCK_PROXY_UPSTREAM_KEY", help="Key sent to the upstream.")
    ] = None,
    model: Annotated[str | None, typer.Option(help="Model name sent upstream.")] = None,
    record: Annotated[Path | None, typer.Option(help="JSONL file every deploy call is appended to.")] = None,
    replay: Annotated[Path | None, typer.Option(help="JSONL recording to answer from (replay).")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Train: cap on each call's output tokens.")] = None,
    temperature: Annotated[float | None, typer.Option(help="Train: temperature of every call.")] = None,
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8090,
    unix_socket: Annotated[
        Path | None, typer.Option("--socket", help="Also listen on this unix socket (owner-only, 0600).")
    ] = None,
    socket_group: Annotated[
        str | None,
        typer.Option(help="Make the --socket 0660 for this group's members (default: owner-only)."),
    ] = None,
) -> None:
    """Serve the OpenAI-compatible chat endpoint and the episode routes until Ctrl-C."""
    from pydantic import ValidationError

    from rock.proxy.server import serve as run
    from rock.proxy.types import ProxyConfig

    try:
        config = ProxyConfig.model_validate(
            {
                "mode": mode,
                "upstream_url": upstream,
                "api_key": api_key,
                "model": model,
                "record_path": record,
                "replay_path": replay,
                "max_tokens": max_tokens,
                "temperature": temperature,
            }
        )
    except ValidationError as error:
        details = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'config'}: {e['msg']}" for e in error.errors())
        typer.echo(f"error: {details}", err=True)
        raise typer.Exit(2) from None
    try:
        run(config, host, port, unix_socket, socket_group)
    except ValueError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from None
