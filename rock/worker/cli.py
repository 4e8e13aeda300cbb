"""`rock worker serve --admin URL`: a node that runs sandboxes for an admin."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="A worker: runs sandboxes in Docker for an admin.", no_args_is_help=True)


@app.command()
def serve(
    admin: Annotated[str, typer.Option(help="The admin's URL, e.g. http://127.0.0.1:8080.")],
    host: Annotated[str, typer.Option(help="Address to bind (0.0.0.0 needs --advertise-url).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free one).")] = 0,
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
    import logging

    from pydantic import ValidationError

    from rock.serving import run_server
    from rock.worker.config import WorkerConfig, default_state_dir
    from rock.worker.server import serve_worker

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    if token is None:
        path = token_file or default_state_dir() / "worker.token"
        if path.is_file():
            token = path.read_text().strip()
        elif token_file is not None:
            typer.secho(f"rock worker serve: no token file at {token_file}", fg=typer.colors.RED, err=True)
            raise typer.Exit(2)
    options = {
        "id": worker_id,
        "token": token,
        "cpus": cpus,
        "memory": memory,
        "slots": slots,
        "state_dir": state_dir,
        "advertise_url": advertise_url,
        "pypi_cache": pypi_cache,
        "apt_cache": apt_cache,
    }
    try:
        config = WorkerConfig(
            admin_url=admin.rstrip("/"),
            host=host,
            port=port,
            **{k: v for k, v in options.items() if v is not None},
        )
        run_server(serve_worker(config, log_level=log_level.lower()))
    except (ValidationError, ValueError, OSError, RuntimeError) as exc:
        typer.secho(f"rock worker serve: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        pass
