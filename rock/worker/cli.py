"""`rock worker serve --admin URL`: a node that runs sandboxes for an admin.

Its settings are one WorkerConfig (rock.worker.config): `--config FILE` (YAML of its fields), then the flags
below (each sets one field, see WORKER_FLAGS), then `--set KEY=VALUE` for any field, validated once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rock.config_flags import ConfigFileOption, SetOption, config_data, source

app = typer.Typer(help="A worker: runs sandboxes in Docker for an admin.", no_args_is_help=True)


# Flag -> the WorkerConfig field it sets. A flag left out sets nothing: the file's value or default stands.
WORKER_FLAGS = {
    "admin": "admin_url",
    "host": "host",
    "port": "port",
    "advertise_url": "advertise_url",
    "worker_id": "id",
    "token": "token",
    "cpus": "cpus",
    "memory": "memory",
    "slots": "slots",
    "state_dir": "state_dir",
    "pypi_cache": "pypi_cache",
    "apt_cache": "apt_cache",
}


@app.command()
def serve(
    admin: Annotated[
        str | None,
        typer.Option(help="The admin's URL, e.g. http://127.0.0.1:8080 (or admin_url in --config)."),
    ] = None,
    config_file: ConfigFileOption = None,
    set_: SetOption = None,
    host: Annotated[
        str | None, typer.Option(help="Address to bind (default 127.0.0.1; 0.0.0.0 needs --advertise-url).")
    ] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on (default 0: any free one).")] = None,
    advertise_url: Annotated[str | None, typer.Option(help="URL the admin calls this worker on.")] = None,
    worker_id: Annotated[
        str | None, typer.Option("--id", help="Stable id; a restart with the same id adopts its containers.")
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(envvar="ROCK_WORKER_TOKEN", help="The fleet's worker credential (not an API key)."),
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option(help="File with the worker credential (default: $ROCK_HOME/worker.token if present)."),
    ] = None,
    cpus: Annotated[float | None, typer.Option(help="CPUs to hand out (default 8x the cores).")] = None,
    memory: Annotated[str | None, typer.Option(help="Memory to hand out (default 2x the RAM).")] = None,
    slots: Annotated[int | None, typer.Option(help="Sandboxes held at most.")] = None,
    state_dir: Annotated[
        Path | None, typer.Option(help="State folder (default $ROCK_HOME or ~/.rock).")
    ] = None,
    log_level: Annotated[str, typer.Option(help="Log level.")] = "info",
    pypi_cache: Annotated[
        str | None,
        typer.Option(help="host:port of a PyPI cache (devpi-server) for sandboxes with network='packages'."),
    ] = None,
    apt_cache: Annotated[
        str | None, typer.Option(help="host:port of an apt cache (apt-cacher) for network='packages'.")
    ] = None,
) -> None:
    """Register with the admin, heartbeat, and run sandboxes until Ctrl-C or SIGTERM."""
    given = dict(locals())  # the options by name (None where not given), for WORKER_FLAGS
    import logging

    from pydantic import ValidationError

    from rock.sdk.configs import ConfigError, validate_config
    from rock.serving import run_server
    from rock.worker.config import WorkerConfig, default_state_dir
    from rock.worker.server import serve_worker

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        data = config_data(config_file, {key: given[flag] for flag, key in WORKER_FLAGS.items()}, set_)
        if "admin_url" not in data:
            raise ValueError("no admin to work for: pass --admin URL (or admin_url in --config)")
        data["admin_url"] = str(data["admin_url"]).rstrip("/")
        if data.get("token") is None:
            path = token_file or default_state_dir() / "worker.token"
            if path.is_file():
                data["token"] = path.read_text().strip()
            elif token_file is not None:
                raise ValueError(f"no token file at {token_file}")
        config = validate_config(WorkerConfig, data, source(config_file))
        run_server(serve_worker(config, log_level=log_level.lower()))
    except (ConfigError, ValidationError, ValueError, OSError, RuntimeError) as exc:
        typer.secho(f"rock worker serve: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        pass
