"""Does the recipe learn, and does it replicate? N independent end-to-end `roll train` runs of one or two
configs, one per seed, and the table every learning claim in the README comes from.

Each run is a fresh `roll train CONFIG` process with the seed in the trainer, the engine and the SFT warm
start (its own SFT output folder), so the runs share nothing but the data stage's content-addressed cache
(generated and validated tasks, teacher trajectories: the same for every seed). Per run it prints base,
after SFT and after RL success on the in-family held-out set (new instances of the trained families), RL
against SFT instance by instance (won, lost, two-sided exact sign test p), and the same for the
out-of-family held-out set. With two configs (e.g. IPA and GRPO) it pairs their final evaluations seed by
seed. A run that failed or did not gain stays in the table. The last line is JSON.

    python benchmarks/learning.py --config configs/ipa.yaml --seeds 0 1 2 3 4
    python benchmarks/learning.py --config configs/ipa.yaml --config configs/grpo.yaml --seeds 0 1 2
    python benchmarks/learning.py --config configs/ipa.yaml --seeds 0 1 --table-only   # existing runs
    python benchmarks/learning.py --config configs/ipa.yaml --table-only --markdown    # as in the README
    python benchmarks/learning.py --config configs/ipa.yaml --seeds 0 --set steps=2      # a quick try
    python benchmarks/learning.py --config configs/ipa.yaml --seeds 2 --keep docs/learning/main-job  # keep
    python benchmarks/learning.py --config configs/ipa.yaml --table-only --by-operation  # what was learned
    python benchmarks/learning.py --config configs/ipa.yaml --table-only --out A --out B  # pooled

`--keep DIR` copies each finished run's eval.jsonl and its ledger entry (wall time, load, the commit, the
config's digest, the overrides and the digest of the settings they make) into DIR, small enough to commit,
so a table can grow over several sittings and anyone can remake it with `--table-only --out DIR`; the
table warns when its runs trained with different settings (the config and its SFT config with the
overrides applied; a setting moved from an override into the config is the same recipe).

Several `--out` folders with `--table-only` pool their runs: each folder's table and verdict, then one
verdict over all of them (e.g. the same recipe on several teacher collections, so that a claim rests on every
run made of it and not on the best five).

`--by-operation` adds, for a terminal config, the in-family held-out instances solved after SFT and after RL
over the runs by the operation each asks (`Instance.variant`: numeric's statistic, file-ops' operation, ...),
beside how many train instances ask it.

Baseline: the SFT model is each run's own baseline (RL vs SFT); with two configs, the second is the first's.
A learning run needs the machine to itself: write the load average (printed per run) next to the figures.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from roll.config import apply_override
from roll.pipeline.comparison import Paired, RunRow, Verdict, final_vs, run_row, verdict

ROOT = Path(__file__).resolve().parents[1]
LOAD_SAMPLE_S = 30  # the 1-minute load average is sampled this often while a run trains


def run_name(config: Path, seed: int) -> str:
    return f"{config.stem}-s{seed}"


def seeded(seed: int, out: Path, config: Path) -> list[str]:
    """The overrides that make run `seed` independent: trainer, engine and SFT seeds, its own folders."""
    name = run_name(config, seed)
    return [
        f"name={name}",
        f"output_dir={out / name}",
        f"trainer.seed={seed}",
        f"engines.engine.seed={seed}",
        f"warm_start.overrides=[seed={seed}, output_dir={out / ('sft-s' + str(seed))}]",
        # The table's base column (SFT vs base), which a config may skip for its own runs: every seed
        # evaluates the same base model, so seeds after the first take that evaluation from the store.
        *(["warm_start.eval_base=true"] if _settings(config).get("warm_start") else []),
    ]


def _settings(config: Path) -> dict[str, Any]:
    return yaml.safe_load(config.read_text()) or {}


def provenance(config: Path, overrides: list[str]) -> dict[str, Any]:
    """What a run was made from: the commit (marked dirty when the tree differs), the config's digest, the
    overrides, and the digest of the settings it trained with (the config with the overrides applied), by
    which the table tells recipes apart."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
        return done.stdout.strip()

    commit = git("rev-parse", "HEAD") or "unknown"
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    return {
        "commit": commit + ("+dirty" if dirty else ""),
        "config_sha256": recipe_digest(config),
        "overrides": list(overrides),
        "recipe_sha256": recipe_digest(config, overrides),
    }


def recipe_digest(config: Path, overrides: list[str] | tuple[str, ...] = ()) -> str:
    """SHA-256 over the settings (comments and layout aside) of a config, with `overrides` applied, and the
    SFT config it names: a setting moved from an override into the config keeps the digest, and whether the
    base model is evaluated (`warm_start.eval_base`) does not count."""
    settings = _settings(config)
    for override in overrides:
        apply_override(settings, override)
    if isinstance(settings.get("warm_start"), dict):
        settings["warm_start"]["eval_base"] = True  # evaluating the base model trains nothing
    sft_config = (settings.get("warm_start") or {}).get("sft_config")
    sft = (
        yaml.safe_load((ROOT / sft_config).read_text())
        if sft_config and (ROOT / sft_config).is_file()
        else None
    )
    canonical = json.dumps({"config": settings, "sft_config": sft}, sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


def keep_run(out: Path, keep: Path, name: str, entry: dict[str, Any]) -> None:
    """Copy a run's eval.jsonl and ledger entry into `keep` (merged into its runs.json)."""
    source = out / name / "eval.jsonl"
    if source.is_file():
        (keep / name).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, keep / name / "eval.jsonl")
    ledger_path = keep / "runs.json"
    ledger = json.loads(ledger_path.read_text()) if ledger_path.is_file() else {}
    ledger[name] = entry
    ledger_path.write_text(json.dumps(ledger, indent=2) + "\n")


def recipes(names: list[str], ledger: dict[str, dict[str, Any]]) -> set[str]:
    """The distinct recipes among the named runs that recorded one: the digest of the settings they trained
    with, or for entries older than that digest, their config's digest and overrides."""
    return {
        entry.get("recipe_sha256") or " ".join([entry["config_sha256"], *entry.get("overrides", [])])
        for name in names
        if "config_sha256" in (entry := ledger.get(name, {}))
    }


def train(config: Path, seed: int, out: Path, extra: list[str], console: Console) -> dict[str, Any]:
    """One full `roll train` in its own process; its wall time, exit code, the load around it and what it
    was made from."""
    name = run_name(config, seed)
    command = [sys.executable, "-m", "roll.cli", "train", str(config), *seeded(seed, out, config), *extra]
    load_before = os.getloadavg()[0]
    console.print(f"[bold]{name}[/bold]: {escape(' '.join(command[3:]))} (load {load_before:.2f})")
    made_from = provenance(config, extra)
    started = time.perf_counter()
    log = out / f"{name}.log"
    loads = [load_before]
    with log.open("w") as handle:
        process = subprocess.Popen(command, cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT)
        while True:
            try:
                process.wait(timeout=LOAD_SAMPLE_S)
                break
            except subprocess.TimeoutExpired:
                loads.append(os.getloadavg()[0])
    wall = time.perf_counter() - started
    console.print(
        f"  exit {process.returncode} after {wall / 60:.1f} min "
        f"(load {min(loads):.1f}-{max(loads):.1f}); log {log}"
    )
    return {
        "exit": process.returncode,
        "minutes": wall / 60,
        "load_before": load_before,
        "load_range": [min(loads), max(loads)],
        **made_from,
    }


def read_evals(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "eval.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _wins(result: Paired | None) -> str:
    return "-" if result is None else f"+{result.gained}/-{result.lost}, p = {result.p:.3g}"


def _pair(result: Paired | None) -> str:
    return "-" if result is None else f"{result.points:+.0f} pts, {_wins(result)}"


HEADERS = (
    "run",
    "base",
    "SFT",
    "RL",
    "SFT vs base",
    "RL vs SFT (in family)",
    "out of family: SFT -> RL",
    "min",
    "load",
)


def cells(row: RunRow, runs: dict[str, dict[str, Any]]) -> list[str]:
    """One run's row of the table, under HEADERS."""
    other = row.out_of_family
    apart = "-" if other is None else f"{other.before:.0%} -> {other.after:.0%} ({_pair(other)})"
    ledger = runs.get(row.name, {})
    minutes, loads = ledger.get("minutes"), ledger.get("load_range")
    return [
        row.name,
        _pct(row.base),
        _pct(row.sft),
        _pct(row.rl),
        _wins(row.sft_vs_base),
        _pair(row.rl_vs_sft),
        apart,
        "-" if minutes is None else f"{minutes:.1f}",
        "-" if loads is None else f"{loads[0]:.1f}-{loads[1]:.1f}",
    ]


def by_operation(config: Path, overrides: list[str], runs: list[list[dict[str, Any]]]) -> str:
    """A Markdown table: per family and operation, the train instances that ask it, the held-out ones, and
    how many of those the runs solved after SFT and after RL (reward 1), summed over the runs."""
    from roll.rollout.terminal.config import TerminalDataConfig
    from rome.data.families import get_family
    from rome.data.recipe import planned_instances

    settings = _settings(config)
    for override in overrides:
        apply_override(settings, override)
    data = TerminalDataConfig.model_validate(settings["env"]["data"])

    def operation(task_id: str) -> tuple[str, str]:
        family, seed = task_id.rsplit("-", 1)
        return family, get_family(family).make(int(seed), dict(data.families[family])).variant

    counts: dict[tuple[str, str], list[int]] = collections.defaultdict(lambda: [0, 0, 0, 0])
    for task_id, (side, _) in planned_instances(data).items():
        if side == "train":
            counts[operation(task_id)][0] += 1
    for number, evals in enumerate(runs):
        labelled = {record["label"]: record.get("seed_rewards", {}) for record in evals}
        after_sft, after_rl = labelled.get("after SFT", {}), labelled.get("after RL", {})
        for key, reward in after_sft.items():
            row = counts[operation(key.split("@")[0])]
            row[1] += number == 0
            row[2] += reward >= 1.0
            row[3] += after_rl.get(key, 0.0) >= 1.0
    lines = [
        f"| family | operation | train instances | held-out instances | solved after SFT ({len(runs)} runs) "
        "| after RL |",
        "|---|---|---|---|---|---|",
    ]
    for (family, name), (train, held_out, sft, rl) in sorted(counts.items()):
        runs_held_out = held_out * len(runs)
        lines.append(
            f"| {family} | {name} | {train} | {held_out} | {sft}/{runs_held_out} | {rl}/{runs_held_out} |"
        )
    return "\n".join(lines)


def table(config: Path, rows: list[RunRow], runs: dict[str, dict[str, Any]]) -> Table:
    out = Table(title=f"{config}: held-out success by seed")
    for header in HEADERS:
        out.add_column(header, overflow="fold")
    for row in rows:
        out.add_row(*cells(row, runs))
    return out


def markdown(rows: list[RunRow], runs: dict[str, dict[str, Any]]) -> str:
    """The same table in Markdown, as the README carries it."""
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(cells(row, runs)) + " |" for row in rows]
    return "\n".join(lines)


def run_label(out: Path, name: str, outs: list[Path]) -> str:
    """A run's name in the tables: its folder's name first when several folders are pooled."""
    return name if len(outs) == 1 else f"{out.name}/{name}"


def verdict_line(config: Path, summary: Verdict, scope: str) -> str:
    mean = "-" if summary.mean_points is None else f"{summary.mean_points:+.1f} points"
    if summary.points_sd is not None:
        mean += f" (sd {summary.points_sd:.1f}; {summary.min_points:+.1f} to {summary.max_points:+.1f})"
    return (
        f"{config}{scope}: RL > SFT with p < 0.05 in {summary.significant} of {summary.runs} runs "
        f"({summary.finished} finished); mean in-family gain {mean}; SFT above base in "
        f"{summary.sft_above_base} of {summary.runs}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", type=Path, action="append", required=True, help="A config (one or two).")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument(
        "--out",
        type=Path,
        action="append",
        help="Runs and logs go here (default runs/learning). Several, with --table-only, pool their runs.",
    )
    parser.add_argument("--set", action="append", default=[], help="An override for every run (key=value).")
    parser.add_argument("--table-only", action="store_true", help="Read the runs already in --out.")
    parser.add_argument("--markdown", action="store_true", help="Print the tables as Markdown.")
    parser.add_argument(
        "--by-operation",
        action="store_true",
        help="Also print, per family and operation, the held-out instances solved after SFT and after RL.",
    )
    parser.add_argument(
        "--keep", type=Path, help="Also copy each run's eval.jsonl and ledger entry here (small, to commit)."
    )
    args = parser.parse_args()
    if len(args.config) > 2:
        parser.error("give one config, or two to compare (e.g. IPA and GRPO)")
    outs: list[Path] = args.out or [ROOT / "runs" / "learning"]
    if len(outs) > 1 and not args.table_only:
        parser.error("runs train into one --out; give several --out with --table-only to pool kept runs")
    console = Console(width=200)
    ledgers: dict[Path, dict[str, dict[str, Any]]] = {}
    for out in outs:
        ledger_path = out / "runs.json"
        ledgers[out] = json.loads(ledger_path.read_text()) if ledger_path.is_file() else {}
    if not args.table_only:
        out, ledger = outs[0], ledgers[outs[0]]
        out.mkdir(parents=True, exist_ok=True)
        for seed in args.seeds:
            for config in args.config:
                name = run_name(config, seed)
                ledger[name] = train(config, seed, out, args.set, console)
                (out / "runs.json").write_text(json.dumps(ledger, indent=2) + "\n")
                if args.keep:
                    keep_run(out, args.keep, name, ledger[name])
    results: dict[str, Any] = {
        "seeds": args.seeds,
        "overrides": args.set,
        "outs": [str(out) for out in outs],
        "configs": {},
    }
    evals = {
        (config, out, seed): read_evals(out / run_name(config, seed))
        for config in args.config
        for out in outs
        for seed in args.seeds
    }
    entries = {run_label(out, name, outs): entry for out in outs for name, entry in ledgers[out].items()}
    for config in args.config:
        pooled: list[RunRow] = []
        for out in outs:
            rows = [
                run_row(run_label(out, run_name(config, seed), outs), evals[(config, out, seed)])
                for seed in args.seeds
            ]
            pooled += rows
            if len(recipes([row.name for row in rows], entries)) > 1:
                console.print(
                    f"[bold red]{config}: these runs trained with different settings[/bold red] (see "
                    f"{out / 'runs.json'}); a table should compare one recipe: rerun the odd ones or pick "
                    "--seeds."
                )
            if args.markdown:
                print(markdown(rows, entries))
            else:
                console.print(table(config, rows, entries))
            console.print(verdict_line(config, verdict(rows), "" if len(outs) == 1 else f" in {out}"))
        if args.by_operation:
            print(
                by_operation(
                    config, args.set, [evals[(config, out, seed)] for out in outs for seed in args.seeds]
                )
            )
        summary = verdict(pooled)
        if len(outs) > 1:
            console.print(verdict_line(config, summary, f", {len(outs)} folders pooled"))
        results["configs"][str(config)] = {
            "runs": [row.as_json() | {"ledger": entries.get(row.name)} for row in pooled],
            "verdict": summary.__dict__,
        }
    if len(args.config) == 2:
        first, second = args.config
        pairs = {}
        for out in outs:
            for seed in args.seeds:
                result = final_vs(evals[(first, out, seed)], evals[(second, out, seed)])
                key = str(seed) if len(outs) == 1 else f"{out.name}/{seed}"
                pairs[key] = None if result is None else result.__dict__ | {"points": result.points}
                console.print(f"seed {key}: {first.stem} vs {second.stem} after RL: {_pair(result)}")
        results["pairs"] = {f"{first.stem} vs {second.stem}": pairs}
    print(json.dumps(results))


if __name__ == "__main__":
    main()
