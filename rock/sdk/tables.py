"""Rich tables that stay readable at any width and in a log.

A table printed on a console narrower than the table's natural width would have every cell squeezed,
wrapped mid-word or cut with an ellipsis; piped into a log it is cut at 80 columns. `print_table` prints the
table as it is when it fits, and otherwise the same content as a plain list: one block per row, its first
cell as the heading and each other cell as `column: value`, wrapped at the console's width and never
truncated. `save_table` writes the whole table at its natural width to a file (a run folder's copy).

Part of the SDK so that every client of the fleet (roll, rome-bench, the SDK's own CLI) prints its tables the
same way without reaching into the fleet's internals.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from rich.console import Console, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text


def natural_width(console: Console, table: Table) -> int:
    """The width the table needs to show every cell without wrapping."""
    return Measurement.get(console, console.options.update_width(10_000), table).maximum


def fits(console: Console, table: Table) -> bool:
    return natural_width(console, table) <= console.width


def _plain(cell: RenderableType) -> str:
    if isinstance(cell, Text):
        return cell.plain
    if isinstance(cell, str):
        return Text.from_markup(cell).plain
    return str(cell)


def as_lines(table: Table) -> list[str]:
    """The table's title and rows as a plain list (no colour, no box drawing)."""
    headers = [_plain(c.header) for c in table.columns]
    columns = [[_plain(cell) for cell in c.cells] for c in table.columns]
    lines = [_plain(table.title)] if table.title else []
    for index in range(table.row_count):
        row = [col[index] if index < len(col) else "" for col in columns]
        first, *rest = row or [""]
        lines.append(f"- {first.replace(chr(10), ' / ')}")
        for header, value in zip(headers[1:], rest, strict=False):
            if value.strip() and value.strip() != "-":
                lines.append(f"    {header}: {value.replace(chr(10), '; ')}")
    return lines


def print_table(console: Console, table: Table) -> None:
    """The table when it fits the console; else the plain list, wrapped at the console's width."""
    if fits(console, table):
        console.print(table)
        return
    for line in as_lines(table):
        indent = " " * (len(line) - len(line.lstrip(" -")) + 2)
        wrapped = textwrap.fill(line, width=max(console.width, 40), subsequent_indent=indent)
        console.print(Text(wrapped), soft_wrap=True)


def save_table(table: Table, path: Path) -> Path:
    """The whole table at its natural width, without colour, in `path` (made with its folder)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        wide = Console(file=handle, width=10_000, color_system=None, force_terminal=False)
        wide = Console(file=handle, width=natural_width(wide, table), color_system=None, force_terminal=False)
        wide.print(table)
    return path
