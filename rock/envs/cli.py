"""`rock envs serve`: the GEM environment routes as their own service."""

from __future__ import annotations

from typing import Annotated

import typer

app = typer.Typer(
    help="GEM environments hosted in sandboxes (make/reset/step/close/list).", no_args_is_help=True
)


@app.command()
def serve(
    admin: Annotated[str | None, typer.Option(help="The ROCK admin's URL (default: the SDK's).")] = None,
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8091,
) -> None:
    """Serve the environment routes until Ctrl-C; environments still open are closed on exit."""
    import uvicorn

    from rock.envs.routes import create_app

    uvicorn.run(create_app(admin), host=host, port=port, log_level="info")
