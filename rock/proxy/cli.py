"""`rock proxy serve`: the ModelProxyService in the foreground.

Its settings are one ProxyConfig (rock.proxy.types): `--config FILE` (YAML of its fields), then the flags
below (each sets one field, see PROXY_FLAGS), then `--set KEY=VALUE` for any field, validated once; host,
port and the socket are where it listens, not how it answers."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rock.config_flags import ConfigFileOption, SetOption, config_data, source

app = typer.Typer(help="The model proxy: agents' model endpoint, recording every call.", no_args_is_help=True)


# Flag -> the ProxyConfig field it sets. A flag left out sets nothing: the file's value or the default stands.
PROXY_FLAGS = {
    "mode": "mode",
    "upstream": "upstream_url",
    "api_key": "api_key",
    "model": "model",
    "record": "record_path",
    "replay": "replay_path",
    "max_tokens": "max_tokens",
    "temperature": "temperature",
}


@app.command()
def serve(
    config_file: ConfigFileOption = None,
    set_: SetOption = None,
    mode: Annotated[
        str | None,
        typer.Option(help="train (engine + chunks; the default), deploy (upstream API) or replay."),
    ] = None,
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
    given = dict(locals())  # the options by name (None where not given), for PROXY_FLAGS
    from rock.proxy.server import serve as run
    from rock.proxy.types import ProxyConfig
    from rock.sdk.configs import ConfigError, validate_config

    try:
        data = config_data(config_file, {key: given[flag] for flag, key in PROXY_FLAGS.items()}, set_)
        config = validate_config(ProxyConfig, data, source(config_file))
    except ConfigError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from None
    try:
        run(config, host, port, unix_socket, socket_group)
    except ValueError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from None
