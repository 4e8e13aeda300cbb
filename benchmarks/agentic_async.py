"""Synchronous (async_ratio 0) vs asynchronous RL on terminal tasks, the same config, in one run.

`roll train` with `env.type: terminal` (configs/ipa_terminal.yaml): every episode is a real ROCK sandbox of a
private fleet, the real iflow agent with its tools in it, every model call through the train-mode proxy, the
task's tests as reward. The model is the scripted engine (a test double of the model's choices: each task's
oracle step, or a mistake at --mistake-rate) with --call-latency seconds per call standing in for
generation, so the env side dominates as in multi-turn agent RL; the trainer trains the real tiny model on
the recorded tokens. Both runs take the same steps; the first step of each is warm-up and left out.

Printed: samples/s of each run and their ratio, and where time goes: per episode the sandbox (create and
delete), the agent (its loop, model calls included), the engine (the model calls) and the tests; per step
the wait for the batch and train + weight sync. Synchronous rollout holds one batch of episodes in flight
and idles while the trainer steps; with async_ratio 1 the next batch's episodes (up to two batches) play
while it trains.

    python benchmarks/agentic_async.py                  # 4 steps per run, a few minutes
    python benchmarks/agentic_async.py --steps 6 --call-latency 2
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from roll.config import load_config
from roll.pipeline.config import TrainConfig

EPISODE_PARTS = ("sandbox", "agent", "gen", "verifier")


def run(base: list[str], name: str, out: Path, extra: list[str], console: Console) -> list[dict[str, Any]]:
    from roll.pipeline.controller import train

    config = load_config(
        TrainConfig,
        Path("configs/ipa_terminal.yaml"),
        [*base, f"name={name}", f"output_dir={out / name}", *extra],
    )
    console.rule(name)
    train(config, console)
    return [json.loads(line) for line in (out / name / "metrics.jsonl").read_text().splitlines()]


def steady(records: list[dict[str, Any]]) -> dict[str, float]:
    """Totals and means over the steps after the first (warm-up)."""
    rest = records[1:]
    wall = sum(r["time_step_s"] for r in rest)
    out = {
        "samples_per_s": sum(r["episodes"] for r in rest) / wall,
        "step_s": wall / len(rest),
        "rollout_wait_s": sum(r["time_rollout_s"] for r in rest) / len(rest),
        "train_sync_s": sum(r["time_train_s"] + r["time_sync_s"] for r in rest) / len(rest),
        "success": sum(r["success"] for r in rest) / len(rest),
        "staleness_mean": sum(r["staleness_mean"] for r in rest) / len(rest),
    }
    for part in EPISODE_PARTS:
        out[f"episode_{part}_s"] = sum(r[f"episode_{part}_s"] for r in rest) / len(rest)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=4, help="Train steps per run (the first is warm-up).")
    parser.add_argument("--call-latency", type=float, default=1.0, help="Seconds each model call takes.")
    parser.add_argument("--mistake-rate", type=float, default=0.3, help="Scripted calls that give up.")
    parser.add_argument("--groups", type=int, default=2, help="Groups of 2 episodes per train step.")
    parser.add_argument("--async-ratio", type=int, default=1, help="async_ratio of the asynchronous run.")
    parser.add_argument("--out", type=Path, help="Keep the runs in this folder (default: a temporary one).")
    args = parser.parse_args()
    # Written to a log, rich would wrap at 80 columns and cut the table's headers.
    console = Console(stderr=True, width=None if sys.stderr.isatty() else 160)
    batch = 2 * args.groups
    base = [
        "trainer.model=builtin:tiny-qwen3-moe",
        "trainer.optimizer.lr=1e-4",
        "engines.engine.type=scripted",
        f"engines.engine.latency_s={args.call_latency}",
        f"engines.engine.mistake_rate={args.mistake_rate}",
        f"steps={args.steps}",
        "eval.episodes=0",
        "save_every=0",
        "rollout.group_size=2",
        f"rollout.groups_per_step={args.groups}",
        # As many episodes at once as the asynchronous run may have started (the sync run cannot use more).
        f"rollout.episodes_in_flight={batch * (args.async_ratio + 1)}",
        f"env.rock.slots={batch * (args.async_ratio + 1)}",
        "resources.trainer_cpus=0.5",
        "resources.engine_cpus=0.5",
    ]
    runs = {"sync": ["async_ratio=0"], "async": [f"async_ratio={args.async_ratio}"]}
    with tempfile.TemporaryDirectory(prefix="roll-agentic-bench-") as folder:
        out = args.out or Path(folder)
        results = {name: steady(run(base, name, out, extra, console)) for name, extra in runs.items()}
    ratio = results["async"]["samples_per_s"] / results["sync"]["samples_per_s"]
    table = Table(
        title=f"sync vs async ratio {args.async_ratio} on terminal tasks (configs/ipa_terminal.yaml), "
        f"scripted engine {args.call_latency:g} s/call, {batch} episodes/step, "
        f"{args.steps - 1} steps after warm-up"
    )
    columns = ["run", "samples/s", "step s", "wait for batch s", "train+sync s"]
    columns += [f"episode {part} s" for part in EPISODE_PARTS] + ["success", "staleness"]
    for column in columns:
        table.add_column(column, justify="right")
    for name, r in results.items():
        parts = [f"{r[f'episode_{part}_s']:.1f}" for part in EPISODE_PARTS]
        table.add_row(
            name,
            f"{r['samples_per_s']:.3f}",
            f"{r['step_s']:.1f}",
            f"{r['rollout_wait_s']:.1f}",
            f"{r['train_sync_s']:.1f}",
            *parts,
            f"{r['success']:.0%}",
            f"{r['staleness_mean']:.2f}",
        )
    console.print(table)
    console.print(f"async/sync samples/s: {ratio:.2f}x (goal >= 1.8x)")
    summary = {
        "benchmark": "agentic_async",
        "call_latency_s": args.call_latency,
        "episodes_per_step": batch,
        "async_ratio": args.async_ratio,
        "ratio": ratio,
        "runs": results,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
