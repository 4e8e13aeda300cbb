"""What a person watches: the step and eval lines of `roll train` and the final summary table (the step
progress itself is `roll.progress.StepProgress`: a live bar in a terminal, a line per step in a log)."""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.table import Table

from rock.sdk.tables import print_table
from roll.pipeline.config import TrainConfig
from roll.progress import print_plain
from roll.rollout.envs import env_kind


def step_line(record: dict[str, Any]) -> str:
    line = (
        f"reward {record['reward']:+.3f} · success {record['success']:.0%} · "
        f"{record['samples_per_s']:.2f} samples/s · staleness {record['staleness_mean']:.2f} · "
        f"rollout {record['time_rollout_s']:.1f}s train {record['time_train_s']:.1f}s "
        f"sync {record['time_sync_s']:.1f}s · gen/env per episode "
        f"{record['episode_gen_s']:.1f}/{record['episode_env_s']:.1f}s"
    )
    # Infrastructure failures are played again, so the batch hides them: say how many there were.
    if failed := record.get("buffer/infra_failed_step"):
        line += f" · {failed} episode(s) failed to run"
    if timeouts := record.get("agent_timeouts"):
        line += f" · {timeouts} agent timeout(s)"
    if errors := record.get("agent_errors"):
        line += f" · {errors} agent error(s)"
    if tampered := record.get("tampered"):
        line += f" · {tampered} tampered episode(s) graded 0"
    return line


def eval_line(record: dict[str, Any]) -> str:
    """One evaluation as one line: what was evaluated, its success over the episodes played, and its cost."""
    played = record.get("episodes", 0)
    if not played:
        failed = record.get("failed", 0)
        return f"eval {record['label']} (step {record['step']}): no episode finished ({failed} failed to run)"
    won = round(record["success"] * played)
    failed = f" · {record['failed']} failed to run" if record.get("failed") else ""
    apart = ""
    if other := record.get("out_of_family"):
        apart = (
            f" · out of family {_success(other)}" if other.get("episodes") else " · out of family: none ran"
        )
    cost = f"reused from {record['reused']}" if record.get("reused") else f"{record['time_s']:.0f}s"
    return (
        f"eval {record['label']} (step {record['step']}): success {record['success']:.0%} ({won}/{played}) · "
        f"reward {record['reward']:+.3f} · {record['turns']:.1f} turns{failed}{apart} · {cost}"
    )


def print_summary(
    console: Console, evals: list[dict[str, Any]], config: TrainConfig, wall_s: float | None = None
) -> None:
    """The eval table (base, after SFT, after RL, ...) with the eval settings, and the run's wall time."""
    ev = config.eval
    sampling = "greedy" if ev.sampling.temperature == 0 else f"temperature {ev.sampling.temperature:g}"
    kind = env_kind(config.env.type)
    what = kind.eval_description(config.env, ev.episodes, ev.seed_offset)
    per_turn = f"<= {ev.sampling.max_new_tokens} tokens per turn"
    # The settings as one plain line (a table title would wrap at the table's width, splitting it in logs).
    print_plain(console, f"Eval success on {what}, {sampling}, {per_turn} ({config.run_dir})")
    title = "Eval success"
    played = [row for row in evals if row.get("episodes")]
    # Piped (CI logs) a console is 80 columns: rather than cut cells and headers, show one block per eval.
    table = summary_table(title, played, kind.summary_columns)
    if console.measure(table, options=console.options.update_width(UNBOUNDED)).maximum > console.width:
        table = summary_table(title, played, kind.summary_columns, vertical=True)
    console.print(table)
    for extra in kind.summary_tables(config.env, played):
        print_table(console, extra)
    if played:
        path = " → ".join(f"{row['label']} {row['success']:.0%}" for row in played)
        console.print(f"Eval success: {path}")
    for before, after in itertools.pairwise(played):
        if line := paired_line(before, after):
            console.print(line)
        if "out_of_family" in before and "out_of_family" in after:
            pair = [
                {**row["out_of_family"], "label": f"{row['label']} (out of family)"}
                for row in (before, after)
            ]
            if line := paired_line(*pair):
                console.print(line)
    if wall_s is not None:
        console.print(f"Wall time of this run: {wall_s / 60:.1f} min")


UNBOUNDED = 10_000  # columns: to measure a table's natural width, which the console's own would clamp


def _success(row: dict[str, Any]) -> str:
    return f"{row['success']:.0%} ({round(row['success'] * row['episodes'])}/{row['episodes']})"


# The summary's columns: header (a line break where it may wrap), the optional column it is (None: always
# shown; an env kind names the ones its evaluations fill in `EnvKind.summary_columns`, and "out_of_family"
# shows when every evaluation has such a held-out set), and its cell.
SUMMARY_COLUMNS: list[tuple[str, str | None, Callable[[dict[str, Any]], str]]] = [
    ("eval", None, lambda row: row["label"]),
    ("step", None, lambda row: str(row["step"])),
    ("success", None, _success),
    ("out of\nfamily", "out_of_family", lambda row: _success(row["out_of_family"])),
    ("reward", None, lambda row: f"{row['reward']:+.3f}"),
    ("format\nerrors", "format_errors", lambda row: f"{row['format_error_rate']:.0%}"),
    ("turns", None, lambda row: f"{row['turns']:.1f}"),
    ("failed\nto run", None, lambda row: str(row.get("failed", 0))),
    (
        "agent\ntimeouts\n/ errors",
        "agent_errors",
        lambda row: f"{row.get('agent_timeouts', 0)} / {row.get('agent_errors', 0)}",
    ),
]


def summary_table(
    title: str, evals: list[dict[str, Any]], optional: frozenset[str], vertical: bool = False
) -> Table:
    """A column per field and a row per evaluation, with the `optional` columns of SUMMARY_COLUMNS;
    `vertical` (for a console too narrow for that): a block of field and value lines per evaluation."""
    shown: set[str | None] = {None, *optional}
    if evals and all(row.get("out_of_family", {}).get("episodes") for row in evals):
        shown.add("out_of_family")
    columns = [(header, cell) for header, only, cell in SUMMARY_COLUMNS if only in shown]
    if vertical:
        table = Table(title=title, show_header=False)
        table.add_column(justify="left")
        table.add_column(justify="right")
        for row in evals:
            for header, cell in columns:
                table.add_row(header.replace("\n", " "), cell(row))
            table.add_section()
        return table
    table = Table(title=title)
    for header, _ in columns:
        table.add_column(header, justify="left" if header == "eval" else "right")
    for row in evals:
        table.add_row(*(cell(row) for _, cell in columns))
    return table


def sign_test_p(gained: int, lost: int) -> float:
    """Two-sided exact sign test (McNemar's exact test): the chance of a split at least this uneven of the
    seeds only one of two evaluations won, were both equally good."""
    n = gained + lost
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(gained, lost) + 1)) / 2**n
    return min(1.0, 2 * tail)


def paired_line(before: dict[str, Any], after: dict[str, Any]) -> str | None:
    """The seed-by-seed comparison of two evaluations of the same seeds (None without per-seed results)."""
    if "won_seeds" not in before or "won_seeds" not in after or before["episodes"] != after["episodes"]:
        return None
    won_before, won_after = set(before["won_seeds"]), set(after["won_seeds"])
    gained, lost = len(won_after - won_before), len(won_before - won_after)
    line = (
        f"{after['label']} vs {before['label']}, seed by seed: won {gained} that it had lost, lost {lost} "
        f"that it had won (both won {len(won_before & won_after)}); "
        f"sign test p = {sign_test_p(gained, lost):.3g}"
    )
    if diff := paired_reward_diff(before.get("seed_rewards", {}), after.get("seed_rewards", {})):
        line += f"; reward {diff[0]:+.3f} per seed (paired standard error {diff[1]:.3f})"
    return line


def paired_reward_diff(before: dict[str, float], after: dict[str, float]) -> tuple[float, float] | None:
    """Mean and standard error of the per-seed reward difference over the seeds both evaluations played."""
    seeds = sorted(before.keys() & after.keys())
    if len(seeds) < 2:
        return None
    diffs = [after[s] - before[s] for s in seeds]
    return statistics.fmean(diffs), statistics.stdev(diffs) / math.sqrt(len(diffs))
