"""`rock packages seed`: fill the package cache once while online, so sandboxes can use it offline."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="The fleet's package cache (PyPI and Debian).", no_args_is_help=True)

# What graders commonly install at test time (pytest, the CTRF plugin, uv for the install script the
# packages forwarder answers from the cache, and uv's tool runs of them) and what the
# project's own task fixtures install (six in a Dockerfile, curl with apt), and python3 for uv in images
# that have none (rome/terminal_tasks/bundle.py installs it before a uv grader).
SEED_PYPI = ("pytest", "pytest-json-ctrf", "six", "uv")
SEED_APT = ("curl", "python3")


@app.command()
def seed(
    folder: Annotated[
        Path | None, typer.Argument(help="Cache folder (default $ALE_HOME/package-cache).")
    ] = None,
    pip: Annotated[list[str] | None, typer.Option(help="PyPI requirement to cache (repeatable).")] = None,
    apt: Annotated[list[str] | None, typer.Option(help="Debian package to cache (repeatable).")] = None,
    apt_image: Annotated[str, typer.Option(help="Local image whose apt fetches the Debian packages.")] = (
        "ale/debian:bookworm"
    ),
    if_needed: Annotated[
        bool,
        typer.Option(
            "--if-needed",
            help="Do nothing when the folder already holds these packages from an earlier seed (set-up's "
            "check on a machine it has set up before).",
        ),
    ] = False,
) -> None:
    """Start the cache online, fetch the packages through it, and stop: they are then served offline."""
    from rock.packages.cache import PackageCache, PackageCacheError, default_folder
    from rock.packages.seed import seed_apt, seed_pypi, seeded_with, write_seeded

    target = folder or default_folder()
    wanted = {"pip": list(pip or SEED_PYPI), "apt": list(apt or SEED_APT), "apt_image": apt_image}
    if if_needed and seeded_with(target) == wanted:
        typer.echo(f"package cache ready in {target} (seeded before with these packages)")
        return
    try:
        with PackageCache(target) as cache:
            typer.echo(f"seeding PyPI packages through {cache.pypi_url}")
            seed_pypi(cache.pypi_url, wanted["pip"])
            if cache.apt is None:
                typer.echo("apt-cacher is not installed: Debian packages are not cached")
            else:
                typer.echo(f"seeding Debian packages through {cache.apt}")
                seed_apt(cache.apt, wanted["apt"], apt_image)
            write_seeded(target, wanted | {"apt": wanted["apt"] if cache.apt else []})
    except (PackageCacheError, RuntimeError) as exc:
        typer.secho(f"rock packages seed: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from None
    typer.echo(f"package cache ready in {target}")
