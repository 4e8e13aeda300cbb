"""Synchronous vs asynchronous (async ratio 1) RL on the same config, in one run.

The env is a GEM game whose every step sleeps (`env.latency_s`), so env time is comparable to generation
time, as with remote agent environments. Both runs train the same model for the same number of steps; the
first step of each is warm-up and is left out. Printed: samples/s of each, their ratio, and the ideal
overlap bound from the synchronous run's time split,
    (T_gen + T_env + T_train) / max(T_gen + T_env, T_train),
where T_gen + T_env is the time the synchronous step waits for its batch and T_train the train step plus
weight sync. The bound assumes rollout throughput is fixed; async ratio 1 also keeps up to two batches of
episodes in flight instead of one, so when rollout is latency-bound (env sleeps, small decode batches)
async can beat the bound. With --multiplex a third run adds a second engine and train-rollout multiplexing
(one engine sleeps while the trainer steps) to show its effect on the CPU.

The default model is the tiny random builtin:tiny-qwen3-moe (6M parameters): on a shared 2-core machine
the SmolLM2-135M variant (`--model builtin:smollm2-135m-instruct`, ~4 GB for trainer, optimizer and
engine) was killed by Ray's memory monitor when other jobs held most of the memory.

    python benchmarks/async_rl.py                 # tiny model, 5 steps per run, a few minutes
    python benchmarks/async_rl.py --model builtin:smollm2-135m-instruct --steps 4 --max-new-tokens 16
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from roll.config import load_config
from roll.pipeline.config import TrainConfig


def run(base: list[str], name: str, out: Path, extra: list[str], console: Console) -> list[dict[str, Any]]:
    from roll.pipeline.controller import train

    config = load_config(
        TrainConfig, Path("configs/ipa.yaml"), [*base, f"name={name}", f"output_dir={out / name}", *extra]
    )
    console.rule(name)
    train(config, console)
    return [json.loads(line) for line in (out / name / "metrics.jsonl").read_text().splitlines()]


def steady(records: list[dict[str, Any]]) -> dict[str, float]:
    """Totals over the steps after the first (warm-up)."""
    rest = records[1:]
    wall = sum(r["time_step_s"] for r in rest)
    return {
        "samples_per_s": sum(r["episodes"] for r in rest) / wall,
        "episode_gen_s": sum(r["episode_gen_s"] for r in rest) / len(rest),
        "episode_env_s": sum(r["episode_env_s"] for r in rest) / len(rest),
        "rollout_s": sum(r["time_rollout_s"] for r in rest) / len(rest),
        "train_s": sum(r["time_train_s"] + r["time_sync_s"] for r in rest) / len(rest),
        "step_s": wall / len(rest),
        "staleness_mean": sum(r["staleness_mean"] for r in rest) / len(rest),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="builtin:tiny-qwen3-moe")
    parser.add_argument("--steps", type=int, default=5, help="Train steps per run (the first is warm-up).")
    parser.add_argument("--env-latency", type=float, default=1.0, help="Seconds each env step sleeps.")
    parser.add_argument("--max-new-tokens", type=int, default=4, help="Most tokens per LLM call.")
    parser.add_argument("--groups", type=int, default=4, help="Groups of 4 episodes per train step.")
    parser.add_argument(
        "--multiplex", action="store_true", help="Also run async with 2 engines, multiplexed."
    )
    parser.add_argument("--out", type=Path, help="Keep the runs in this folder (default: a temporary one).")
    args = parser.parse_args()
    console = Console(stderr=True)
    base = [
        f"trainer.model={args.model}",
        f"steps={args.steps}",
        f"env.latency_s={args.env_latency}",
        "eval.episodes=0",
        "warm_start=null",
        "save_every=0",
        f"rollout.groups_per_step={args.groups}",
        f"rollout.episodes_in_flight={8 * args.groups}",  # two batches: as many as async ratio 1 starts
        f"rollout.sampling.max_new_tokens={args.max_new_tokens}",
    ]
    runs = {"sync": ["async_ratio=0"], "async": ["async_ratio=1"]}
    if args.multiplex:
        runs["async-multiplex"] = [
            "async_ratio=1",
            "engines.num_engines=2",
            "multiplex.enabled=true",
            "multiplex.min_awake=1",
            "resources.engine_cpus=0.5",
        ]
    with tempfile.TemporaryDirectory(prefix="roll-async-bench-") as folder:
        out = args.out or Path(folder)
        results = {name: steady(run(base, name, out, extra, console)) for name, extra in runs.items()}
    sync, fast = results["sync"], results["async"]
    bound = (sync["rollout_s"] + sync["train_s"]) / max(sync["rollout_s"], sync["train_s"])
    ratio = fast["samples_per_s"] / sync["samples_per_s"]
    table = Table(
        title=f"async RL, {args.model}, env latency {args.env_latency}s/step, "
        f"{4 * args.groups} episodes/step, <= {args.max_new_tokens} tokens per call"
    )
    columns = ("run", "samples/s", "gen/env s per episode", "rollout wait s/step", "train+sync s/step")
    for column in (*columns, "step s", "staleness"):
        table.add_column(column, justify="right")
    for name, r in results.items():
        table.add_row(
            name,
            f"{r['samples_per_s']:.3f}",
            f"{r['episode_gen_s']:.1f}/{r['episode_env_s']:.1f}",
            f"{r['rollout_s']:.1f}",
            f"{r['train_s']:.1f}",
            f"{r['step_s']:.1f}",
            f"{r['staleness_mean']:.2f}",
        )
    console.print(table)
    console.print(
        f"async/sync: {ratio:.2f}x; ideal overlap bound from the sync split: {bound:.2f}x; "
        f"reached {ratio / bound:.0%} of the bound (goal >= 90%)"
    )
    summary = {"benchmark": "async_rl", "model": args.model, "ratio": ratio, "bound": bound, "runs": results}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
