"""`rock`: the sandbox fleet's command line. Sub-commands import their heavy dependencies lazily."""

import typer

from rock.images.cli import app as image_app

app = typer.Typer(help="ROCK: the sandbox fleet.", no_args_is_help=True)
app.add_typer(image_app, name="image", help="Local images and the public-name alias table.")
