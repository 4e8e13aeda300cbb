"""The terminal env's part of `roll train`'s summary: success by task and start point k (k oracle expert
steps prefilled), one column per evaluation, and each task's crucial fork per evaluation."""

from __future__ import annotations

from typing import Any

from rich.table import Table


def _rate(rates: dict[str, float] | None, start: str) -> str:
    if rates is None or start not in rates:
        return "-"
    return f"{rates[start]:.2f}"


def start_point_table(evals: list[dict[str, Any]], title: str) -> Table:
    """Rows: task and start point; columns: the evaluations (by label) in order."""
    played = [row for row in evals if row.get("by_start")]
    table = Table(title=title)
    table.add_column("task", justify="left")
    table.add_column("k", justify="right")
    for row in played:
        table.add_column(row["label"], justify="right")
    tasks: dict[str, set[str]] = {}
    for row in played:
        for task, rates in row["by_start"].items():
            tasks.setdefault(task, set()).update(rates)
    for task, starts in tasks.items():
        for index, start in enumerate(sorted(starts, key=int)):
            rates = [_rate(row["by_start"].get(task), start) for row in played]
            table.add_row(task if index == 0 else "", start, *rates)
        forks = [row.get("crucial_fork", {}).get(task) for row in played]
        table.add_row("", "fork", *("-" if fork is None else str(fork) for fork in forks))
        table.add_section()
    return table
