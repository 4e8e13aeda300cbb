"""Tables stay readable when narrow or piped: the plain list keeps every word of every cell."""

import io
from pathlib import Path

from rich.console import Console
from rich.table import Table

from rock.sdk.tables import as_lines, print_table, save_table

WHY = "no: its tests install pytest==8.4.1 and the seeded package cache holds only 9.2.0; run online"


def wide_table() -> Table:
    table = Table(title="check of /a/folder/of/tasks (package cache: none)", show_lines=True)
    for column in ("task", "layout", "images", "here"):
        table.add_column(column)
    table.add_row("csv-sales-rollup", "harbor", "python:3.11-slim -> ale/python:3.11", f"[red]{WHY}[/red]")
    table.add_row("semver-sort", "harbor", "-", "[green]yes[/green]")
    return table


def printed(width: int, terminal: bool) -> str:
    out = io.StringIO()
    print_table(Console(file=out, width=width, force_terminal=terminal, color_system=None), wide_table())
    return out.getvalue()


def test_a_narrow_or_piped_console_gets_every_word_as_a_plain_list() -> None:
    text = printed(80, terminal=False)
    assert "…" not in text and "┃" not in text
    assert all(len(line) <= 80 for line in text.splitlines())
    assert " ".join(text.split()).count(WHY) == 1  # wrapped, never cut
    assert "- csv-sales-rollup" in text and "    layout: harbor" in text
    assert "- semver-sort" in text and "images" not in text.split("- semver-sort")[1]  # "-" cells dropped


def test_a_console_wide_enough_gets_the_table() -> None:
    text = printed(200, terminal=True)
    assert "┃ task" in text and WHY in text


def test_the_saved_copy_is_the_whole_table(tmp_path: Path) -> None:
    path = save_table(wide_table(), tmp_path / "run" / "check.txt")
    text = path.read_text()
    assert WHY in text and "┃ task" in text and "\x1b[" not in text


def test_lines_cover_title_and_rows() -> None:
    assert as_lines(wide_table())[:2] == [
        "check of /a/folder/of/tasks (package cache: none)",
        "- csv-sales-rollup",
    ]
