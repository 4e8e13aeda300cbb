"""`rome`: the ROME apps. `rome data ...` is the data pipeline (`rome-bench` runs the benchmark)."""

from __future__ import annotations

import typer

from rome.data.cli import app as data_app

app = typer.Typer(help="ROME: task data for training and evaluating terminal agents.", no_args_is_help=True)
app.add_typer(data_app, name="data")


@app.callback()
def _exit_cleanly_on_sigterm() -> None:
    """SIGTERM (from `timeout`, a scheduler) unwinds like Ctrl-C, so sandboxes and the private fleet stop."""
    import signal
    import sys

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


if __name__ == "__main__":
    app()
