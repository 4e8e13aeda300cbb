"""`roll view`'s data and folder: the held-out table links every played instance to its episode, the
folder carries its own charting library, and --serve's server answers on loopback only."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
from typer.testing import CliRunner

from roll.cli import app
from roll.view.data import run_view
from roll.view.page import server
from tests.view.run_fixture import write_run


def test_held_out_table_links_each_instance_to_its_episode(tmp_path: Path) -> None:
    view = run_view(write_run(tmp_path / "ipa"))
    table = view["held_out"]
    assert table["columns"] == ["base", "after SFT", "after RL"]
    rows = {row["key"]: row["cells"] for row in table["rows"]}
    assert [c["won"] for c in rows["csv-total@0"]] == [False, False, True]
    assert [c["won"] for c in rows["word-count@0"]] == [True, True, False]
    for cells in rows.values():
        for cell in cells:
            assert view["episodes"][cell["episode"]]["extra"]["kind"] == "eval"
    titles = [p["title"] for p in view["panels"]]
    for wanted in ("train success by start point k", "held-out success (2 tasks)", "failed episodes per step",
                   "loss", "entropy", "lengths"):  # fmt: skip
        assert wanted in titles


def test_view_writes_a_self_contained_folder_and_serves_it_on_loopback(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path / "ipa")
    out = tmp_path / "page"
    result = CliRunner().invoke(app, ["view", str(run_dir), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == [
        "data.js",
        "index.html",
        "plotly.min.js",
        "view.css",
        "view.js",
    ]
    html = (out / "index.html").read_text()
    assert "http" not in html  # nothing from outside: every script and style is beside the page
    httpd = server(out)
    assert httpd.server_address[0] == "127.0.0.1"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        port = httpd.server_address[1]
        page = httpx.get(f"http://127.0.0.1:{port}/index.html", timeout=10)
        assert page.status_code == 200 and "view.js" in page.text
        assert httpx.get(f"http://127.0.0.1:{port}/data.js", timeout=10).text.startswith("window.VIEW = ")
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_folder_that_is_no_run_is_refused_with_what_to_pass(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["view", str(tmp_path)])
    assert result.exit_code == 2 and "pass a folder written by `roll train`" in result.output


def test_out_of_family_instances_are_rows_of_their_own() -> None:
    from roll.view.data import held_out_table

    evals = [
        {"label": "after SFT", "seed_rewards": {"a@0": 1.0}, "won_seeds": ["a@0"],
         "out_of_family": {"seed_rewards": {"z@0": 0.0}, "won_seeds": []}},
        {"label": "after RL", "seed_rewards": {"a@0": 1.0}, "won_seeds": ["a@0"],
         "out_of_family": {"seed_rewards": {"z@0": 1.0}, "won_seeds": ["z@0"]}},
    ]  # fmt: skip
    table = held_out_table(evals, {})
    assert [(r["key"], r["out_of_family"]) for r in table["rows"]] == [("a@0", False), ("z@0", True)]
    assert [c["won"] for c in table["rows"][1]["cells"]] == [False, True]


def test_serve_on_a_taken_port_says_what_to_do(tmp_path: Path) -> None:
    taken = server(tmp_path)
    try:
        port = taken.server_address[1]
        result = CliRunner().invoke(
            app, ["view", str(write_run(tmp_path / "ipa")), "--serve", "--port", str(port)]
        )
    finally:
        taken.server_close()
    assert result.exit_code == 2 and f"cannot serve on 127.0.0.1:{port}" in result.output
