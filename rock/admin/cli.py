"""`rock admin serve`: the control plane, plus one local worker unless --no-local-worker."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="The admin: control plane of the fleet.", no_args_is_help=True)


@app.command()
def serve(
    host: Annotated[
        str, typer.Option(help="Address to bind; anything but 127.0.0.1 needs an API key.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8080,
    state_dir: Annotated[
        Path | None, typer.Option(help="State folder (default $ROCK_HOME or ~/.rock).")
    ] = None,
    database_url: Annotated[
        str | None, typer.Option(help="SQLAlchemy URL of the store (default sqlite in the state folder).")
    ] = None,
    api_key: Annotated[
        str | None, typer.Option(envvar="ROCK_API_KEY", help="One API key (16+ characters), no quota.")
    ] = None,
    keys: Annotated[
        Path | None, typer.Option(help="YAML list of keys with quotas: {name, key, max_sandboxes, ...}.")
    ] = None,
    local_worker: Annotated[bool, typer.Option(help="Run one worker inside the admin's process.")] = True,
    worker_id: Annotated[
        str | None, typer.Option(help="Id of the local worker (default: host + state).")
    ] = None,
    worker_cpus: Annotated[float | None, typer.Option(help="CPUs the local worker hands out.")] = None,
    worker_memory: Annotated[
        str | None, typer.Option(help="Memory the local worker hands out, e.g. 16g.")
    ] = None,
    worker_slots: Annotated[
        int | None, typer.Option(help="Sandboxes the local worker holds at most.")
    ] = None,
    heartbeat_timeout: Annotated[float, typer.Option(help="Seconds before a silent worker is lost.")] = 15.0,
    log_level: Annotated[str, typer.Option(help="uvicorn/rock log level.")] = "info",
) -> None:
    """Serve the admin API (sandboxes, exec, files, health, /metrics) until Ctrl-C or SIGTERM."""
    import asyncio
    import logging

    from pydantic import ValidationError

    from rock.admin.config import AdminConfig, KeyPolicy, load_keys
    from rock.admin.server import serve_admin
    from rock.worker.config import WorkerConfig

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        policies = load_keys(keys) if keys else []
        if api_key:
            policies.insert(0, KeyPolicy(name="default", key=api_key))
        common: dict[str, object] = {"state_dir": state_dir} if state_dir else {}
        worker = None
        if local_worker:
            overrides = {"id": worker_id, "cpus": worker_cpus, "memory": worker_memory, "slots": worker_slots}
            worker = WorkerConfig(**common, **{k: v for k, v in overrides.items() if v is not None})
        config = AdminConfig(
            host=host,
            port=port,
            database_url=database_url,
            api_keys=policies,
            heartbeat_timeout=heartbeat_timeout,
            local_worker=worker,
            **common,
        )
        asyncio.run(serve_admin(config, log_level=log_level.lower()))
    except (ValidationError, ValueError, OSError) as exc:
        typer.secho(f"rock admin serve: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        pass
