"""The IPA-on-terminal-tasks report: success by start point before and after training (and after every
round, when evaluated), and how the rollback start point moved, as rich tables (the same numbers are in
report.json)."""

from __future__ import annotations

from typing import Any


def _rate(rates: dict[str, float] | None, start: int) -> str:
    if rates is None or str(start) not in rates:
        return "-"
    return f"{rates[str(start)]:.2f}"


def _expert(entry: dict[str, Any]) -> str:
    steps = str(entry.get("expert_steps", "-"))
    refreshed = entry.get("refreshed")
    return steps if refreshed is None else f"{steps} + (k={refreshed['start']})"


def render_tables(report: dict[str, Any]) -> list[Any]:
    """One table of success by start point (before / after) and one of the rollback path per task."""
    from rich.table import Table

    wall = report.get("wall_time_s")
    title = f"success rate by start point k (k expert chunks prefilled), {report['model']}"
    if wall is not None:
        title += f", {wall / 60:.1f} min"
    # With an evaluation after every round, one column per round (the last one is `after`).
    evaluated = sorted(
        {entry["round"] for row in report["tasks"].values() for entry in row["rounds"] if "eval" in entry}
    )
    success = Table(title=title)
    columns = ["task", "k", "before", *(f"after r{index}" for index in evaluated)]
    for column in columns if evaluated else [*columns, "after"]:
        success.add_column(column, justify="left" if column == "task" else "right")
    for task_id, row in report["tasks"].items():
        evals = {entry["round"]: entry.get("eval") for entry in row["rounds"]}
        for start in range(row["expert_chunks"]):
            name = task_id if start == 0 else ""
            later = [_rate(evals.get(index), start) for index in evaluated]
            later = later or [_rate(row.get("after"), start)]
            success.add_row(name, str(start), _rate(row["before"], start), *later)
        success.add_section()
    tables = [success]
    if any(row["rounds"] for row in report["tasks"].values()):
        rollback = Table(
            title="rollback start point by round (anchors: successes/episodes; * imitation; expert: its "
            "steps after the round, + when a success from start k refreshed it)"
        )
        for column in ("task", "round", "start", "anchors", "next start", "expert"):
            rollback.add_column(column, justify="left" if column == "task" else "right")
        for task_id, row in report["tasks"].items():
            for index, entry in enumerate(row["rounds"]):
                anchors = ", ".join(
                    f"k={k}: {s}/{n}"
                    for k, (s, n) in sorted(entry["anchors"].items(), key=lambda x: -int(x[0]))
                )
                rollback.add_row(
                    task_id if index == 0 else "",
                    str(entry["round"]),
                    str(entry["start"]),
                    anchors + (" *" if entry["imitation"] else ""),
                    str(entry["next_start"]),
                    _expert(entry),
                )
            rollback.add_section()
        tables.append(rollback)
    if report.get("rounds"):
        training = Table(title="training rounds (IPA loss; expert NLL: imitation tokens before -> after)")
        for column in (
            "round",
            "trained/trajectories",
            "imitation",
            "loss",
            "expert NLL",
            "version (trainer/engine)",
        ):
            training.add_column(column, justify="right")
        for entry in report["rounds"]:
            nll = "-"
            if "expert_nll_before" in entry:
                nll = f"{entry['expert_nll_before']:.3f} -> {entry['expert_nll_after']:.3f}"
            training.add_row(
                str(entry["round"]),
                f"{entry['trained_trajectories']}/{entry['trajectories']}",
                str(entry["imitation_trajectories"]),
                f"{entry['loss']:.4f}",
                nll,
                f"{entry['trainer_version']}/{entry['engine_version']}",
            )
        tables.append(training)
    return tables
