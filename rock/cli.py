"""`rock`: the sandbox fleet's command line. Sub-commands import their heavy dependencies lazily."""

from pathlib import Path

import typer

from rock.admin.cli import app as admin_app
from rock.envs.cli import app as envs_app
from rock.images.cli import app as image_app
from rock.packages.cli import app as packages_app
from rock.proxy.cli import app as proxy_app
from rock.sdk.cli import app as sandbox_app
from rock.worker.cli import app as worker_app

app = typer.Typer(help="ROCK: the sandbox fleet.", no_args_is_help=True)
app.add_typer(image_app, name="image", help="Local images and the public-name alias table.")
app.add_typer(admin_app, name="admin", help="The admin: control plane (and one local worker).")
app.add_typer(worker_app, name="worker", help="A worker node that runs sandboxes in Docker.")
app.add_typer(sandbox_app, name="sandbox", help="Create, list, use and remove sandboxes.")
app.add_typer(
    envs_app, name="envs", help="GEM environments hosted in sandboxes (make/reset/step/close/list)."
)
app.add_typer(packages_app, name="packages", help="The package cache: seed it while online.")
app.add_typer(proxy_app, name="proxy", help="The model proxy: agents' model endpoint, recording every call.")


@app.command()
def fleet(
    parent_pid: int = typer.Option(..., help="Stop (and remove everything) when this process is gone."),
    ready: Path = typer.Option(..., help="File the admin's URL is written to once its worker is up."),
    slots: int | None = typer.Option(None, help="Sandboxes the local worker holds at most."),
    packages: str | None = typer.Option(None, help="online|offline; default $ALE_PACKAGES, else online."),
    build_context_root: list[Path] | None = typer.Option(
        None, help="A folder the fleet builds images from (a task set); repeatable."
    ),
) -> None:
    """A private fleet (admin and one local worker on free loopback ports) until SIGTERM or until --parent-pid
    exits; its containers and state are removed then. The base images are built first when missing. Clients
    start it with rock.sdk's PrivateFleet."""
    from rock.fleet import serve_private

    serve_private(slots, packages, parent_pid, ready, build_context_root or [])


@app.command()
def demo(
    sandboxes: int = typer.Option(4, help="How many sandboxes to open at once."),
    image: str = typer.Option("python:3.11", help="Image of the sandboxes."),
) -> None:
    """Start a fleet, open sandboxes concurrently, run commands in them, print a table, shut down."""
    from rock.demo import main

    raise typer.Exit(main(sandboxes=sandboxes, image=image))


if __name__ == "__main__":
    app()
