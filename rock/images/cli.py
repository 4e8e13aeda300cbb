"""`rock image`: bootstrap the local base images, build a task's Dockerfile through the alias table, list."""

import time
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

app = typer.Typer(no_args_is_help=True)


class RichReporter:
    """Prints each bootstrap step, its outcome and time. On a terminal a spinner shows a long step's latest
    output line; elsewhere (a CI log) the step and its output lines are printed as they come."""

    def __init__(self) -> None:
        from rich.console import Console

        self.console = Console()
        self.status: Any = None
        self.name = ""
        self.started = time.monotonic()

    def step(self, name: str) -> None:
        self.stop()
        self.name = name
        self.started = time.monotonic()
        if self.console.is_terminal:
            self.status = self.console.status(f"[bold]{escape(name)}[/bold]")
            self.status.start()
        else:
            self.console.print(f"… {escape(name)}")

    def line(self, text: str) -> None:
        if self.status is not None:
            self.status.update(f"[bold]{escape(self.name)}[/bold] [dim]{escape(text[-100:])}[/dim]")
        elif not self.console.is_terminal:
            self.console.print(f"  [dim]{escape(text)}[/dim]", highlight=False)

    def done(self, name: str, detail: str) -> None:
        self.stop()
        elapsed = time.monotonic() - self.started
        self.console.print(f"[green]✓[/green] {escape(name)}: {escape(detail)} [dim]({elapsed:.1f} s)[/dim]")
        self.started = time.monotonic()

    def stop(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None


@app.command()
def bootstrap(
    force: bool = typer.Option(False, "--force", help="rebuild every image, and redo debootstrap"),
) -> None:
    """Build the local base images (ale/debian:bookworm, ale/python:3.11, ale/busybox:latest); fast when
    they exist."""
    from rock.images.bootstrap import ensure_base_images
    from rock.images.errors import BootstrapError

    reporter = RichReporter()
    try:
        ids = ensure_base_images(reporter, force=force)
    except BootstrapError as exc:
        reporter.stop()
        reporter.console.print(f"[bold red]✗ {escape(str(exc))}[/bold red]")
        raise typer.Exit(1) from None
    reporter.console.print(f"[bold green]base images ready:[/bold green] {', '.join(ids)}")


@app.command()
def build(
    context: Path = typer.Argument(..., help="folder holding the Dockerfile", exists=True, file_okay=False),
    tag: str = typer.Option(None, "--tag", "-t", help="image name (default: ale/build-<folder>:<hash>)"),
    file: str = typer.Option("Dockerfile", "--file", "-f", help="Dockerfile name inside the folder"),
) -> None:
    """Build a Dockerfile with its FROM lines mapped through the alias table (python:3.11-slim and so on)."""
    from rich.console import Console

    from rock.images.build import build_image
    from rock.images.errors import ImageError

    console = Console()
    try:
        with console.status(f"building {context}") as status:
            built = build_image(context, tag, file, on_line=lambda line: status.update(escape(line[-120:])))
    except ImageError as exc:
        console.print(f"[bold red]✗[/bold red] {escape(str(exc))}")
        raise typer.Exit(1) from None
    console.print(built)


@app.command("ls")
def list_images() -> None:
    """List the local ALE images and the alias table."""
    from rich.console import Console
    from rich.table import Table

    from rock.images.aliases import BASE_IMAGES, aliases_file, load_aliases
    from rock.images.build import docker_client
    from rock.images.errors import ImageError
    from rock.sdk.tables import print_table

    console = Console()
    try:
        client = docker_client()
        table_data = load_aliases().table()
    except ImageError as exc:
        console.print(f"[bold red]✗[/bold red] {exc}")
        raise typer.Exit(1) from None
    images = Table(title="local images (ale/*)")
    for column in ("image", "id", "size", "created"):
        images.add_column(column)
    for image in sorted(client.images.list(name="ale/*"), key=lambda i: i.tags[0] if i.tags else ""):
        for image_tag in image.tags:
            size = f"{image.attrs.get('Size', 0) / 2**20:.0f} MB"
            images.add_row(
                image_tag, image.short_id.split(":")[-1], size, image.attrs.get("Created", "")[:19]
            )
    print_table(console, images)
    present = {tag for image in client.images.list(name="ale/*") for tag in image.tags}
    missing = [name for name in BASE_IMAGES if name not in present]
    if missing:
        console.print(
            f"[yellow]missing base images: {', '.join(missing)}; run `rock image bootstrap`[/yellow]"
        )
    aliases = Table(title=f"aliases (override in {aliases_file()})")
    aliases.add_column("public name")
    aliases.add_column("local image")
    for pattern, target in table_data.items():
        aliases.add_row(pattern, target)
    print_table(console, aliases)
