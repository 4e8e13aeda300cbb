"""Write a viewer folder: index.html, the page's script and style, the charting library (plotly's bundled
plotly.min.js, from the installed `plotly` package: nothing is fetched from a CDN), and data.js with the
view's data. Opened from disk (file://) it needs no server; `serve` shows it on loopback."""

from __future__ import annotations

import functools
import json
import shutil
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from importlib.resources import files
from pathlib import Path
from typing import Any

STATIC = ("index.html", "view.js", "view.css")
CHARTS = "plotly.min.js"


def plotly_js() -> Path:
    """The plotly.js bundle the `plotly` Python package ships."""
    import plotly

    path = Path(plotly.__file__).parent / "package_data" / CHARTS
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: reinstall plotly (`.venv/bin/pip install --force-reinstall plotly`)"
        )
    return path


def write_page(view: dict[str, Any], out: Path) -> Path:
    """Write the viewer of `view` into `out`; returns the path of its index.html."""
    out.mkdir(parents=True, exist_ok=True)
    static = files("roll.view") / "static"
    for name in STATIC:
        (out / name).write_text(static.joinpath(name).read_text(encoding="utf-8"), encoding="utf-8")
    charts = out / CHARTS
    source = plotly_js()
    if not charts.is_file() or charts.stat().st_size != source.stat().st_size:
        shutil.copyfile(source, charts)
    # A script, not JSON: pages opened from file:// may not fetch() files beside them.
    (out / "data.js").write_text("window.VIEW = " + json.dumps(view) + ";\n", encoding="utf-8")
    return out / "index.html"


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def server(folder: Path, port: int = 0) -> ThreadingHTTPServer:
    """An HTTP server for `folder` on 127.0.0.1 (port 0: any free one); the caller runs and closes it."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    return ThreadingHTTPServer(("127.0.0.1", port), handler)
