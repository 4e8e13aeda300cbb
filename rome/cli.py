"""`rome`: the ROME apps. `rome data ...` is the data pipeline (`rome-bench` runs the benchmark)."""

from __future__ import annotations

import typer

from rome.data.cli import app as data_app

app = typer.Typer(help="ROME: task data for training and evaluating terminal agents.", no_args_is_help=True)
app.add_typer(data_app, name="data")

if __name__ == "__main__":
    app()
