"""`roll view runs/<name>`: write the run's viewer folder, and with --serve show it on loopback."""

from __future__ import annotations

from pathlib import Path

import typer


def serve_folder(folder: Path, port: int) -> None:
    """Serve `folder` on 127.0.0.1 until Ctrl-C."""
    from roll.view.page import server

    try:
        httpd = server(folder, port)
    except OSError as error:
        typer.echo(f"cannot serve on 127.0.0.1:{port} ({error}); pass a free --port, or 0", err=True)
        raise typer.Exit(2) from error
    host, bound = httpd.server_address[:2]
    typer.echo(f"Serving {folder} at http://{host}:{bound}/index.html (Ctrl-C stops)")
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()


def view(
    run_dir: Path = typer.Argument(..., help="A run folder written by `roll train`, e.g. runs/ipa."),
    out: Path | None = typer.Option(None, help="Folder to write the viewer into (default RUN_DIR/view)."),
    serve: bool = typer.Option(False, "--serve", help="Also serve the folder on 127.0.0.1."),
    port: int = typer.Option(8765, help="Port for --serve (0: any free one)."),
) -> None:
    """A run as one static HTML folder: curves, held-out instances (each opens its transcript), SFT vs RL."""
    from roll.view.data import ViewError, run_view
    from roll.view.page import write_page

    try:
        index = write_page(run_view(run_dir), out or run_dir / "view")
    except ViewError as error:
        typer.echo(f"roll view: {error}", err=True)
        raise typer.Exit(2) from error
    typer.echo(f"Viewer written: {index.resolve()} (open it in a browser; no server needed)")
    if serve:
        serve_folder(index.parent, port)
