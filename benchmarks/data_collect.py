"""ROME data pipeline throughput, measured in one run.

1. Generation: 1,000 instances of every family written as Harbor task folders (no Docker); goal: each
   family's 1,000 in under a minute.
2. Collection: trajectories per minute at concurrency 1 (the baseline) and 4, on the same level-1 instances,
   (a) with the oracle teacher and (b) with iFlow against a scripted engine behind ROLL's real server (the
   tiny builtin model's tokenizer; the proxy records token ids). Goal: >= 3x from 1 to 4.

Everything runs in a private ROCK fleet; model calls go through the proxy in deploy mode, as `rome data
collect` does. Prints the ratios and a final JSON line.
Usage: python benchmarks/data_collect.py [--generate 1000] [--attempts 2] [--skip-collect]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from rome.data.families import FAMILIES
from rome.data.taskset import generate

CONCURRENCY = (1, 4)


def bench_generation(count: int) -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix="rome-data-bench-"))
    seconds: dict[str, float] = {}
    try:
        for name in FAMILIES:
            started = time.perf_counter()
            generate(name, count, 0, root / name)
            seconds[name] = time.perf_counter() - started
            print(f"generate {name:12} {count} instances in {seconds[name]:6.2f} s", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return seconds


def bench_collect(attempts: int) -> dict[str, Any]:
    from roll.engine.server.loopback import serve_on_loopback
    from roll.models import load_model
    from roll.testing import ScriptedEngine
    from rome.bench.runner import sandbox_provider
    from rome.data.collect import CollectSettings, collect
    from rome.data.testing import teacher_policy

    root = Path(tempfile.mkdtemp(prefix="rome-data-bench-"))
    tasks = root / "tasks"
    for name in FAMILIES:
        generate(name, 1, 0, tasks, {"level": 1})
    results: dict[str, Any] = {}
    loaded = load_model("builtin:tiny-qwen3-moe")
    try:
        with (
            sandbox_provider("rock") as provider,
            serve_on_loopback(ScriptedEngine(loaded.tokenizer, policy=teacher_policy(tasks)), loaded) as url,
        ):
            # One untimed pass builds the images and warms the fleet.
            collect(tasks, root / "warm.jsonl", CollectSettings(concurrency=4), provider)
            for kind in ("oracle-teacher", "scripted-engine"):
                for concurrency in CONCURRENCY:
                    settings = CollectSettings(
                        agent="oracle-teacher" if kind == "oracle-teacher" else "iflow",
                        model=None if kind == "oracle-teacher" else url,
                        attempts=attempts,
                        concurrency=concurrency,
                        mistake_rate=0.0,
                    )
                    out = root / f"{kind}-{concurrency}.jsonl"
                    started = time.perf_counter()
                    stats = collect(tasks, out, settings, provider)
                    seconds = time.perf_counter() - started
                    per_minute = stats.trajectories / seconds * 60
                    with_ids = sum(
                        1
                        for line in out.read_text().splitlines()
                        if all(c["output_token_ids"] for c in json.loads(line)["calls"])
                    )
                    results[f"{kind}@{concurrency}"] = {
                        "trajectories": stats.trajectories,
                        "resolved": stats.resolved,
                        "seconds": round(seconds, 2),
                        "per_minute": round(per_minute, 2),
                        "with_token_ids": with_ids,
                    }
                    print(
                        f"{kind:16} concurrency {concurrency}: {stats.trajectories} trajectories "
                        f"({stats.resolved} resolved, {with_ids} with token ids) in {seconds:6.1f} s = "
                        f"{per_minute:6.1f}/min",
                        flush=True,
                    )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for kind in ("oracle-teacher", "scripted-engine"):
        ratio = results[f"{kind}@4"]["per_minute"] / results[f"{kind}@1"]["per_minute"]
        results[f"{kind}_ratio_4_vs_1"] = round(ratio, 2)
        print(f"{kind}: concurrency 4 vs 1 = {ratio:.2f}x (goal >= 3x)")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--generate", type=int, default=1000, help="instances per family")
    parser.add_argument("--attempts", type=int, default=2, help="attempts per instance in each collect run")
    parser.add_argument("--skip-collect", action="store_true", help="only the generation part (no Docker)")
    args = parser.parse_args()
    seconds = bench_generation(args.generate)
    slowest = max(seconds.values())
    print(f"generation: slowest family {slowest:.2f} s for {args.generate} (goal: under 60 s)")
    results: dict[str, Any] = {
        "generate_instances_per_family": args.generate,
        "generate_seconds": {k: round(v, 2) for k, v in seconds.items()},
        "generate_total_seconds": round(sum(seconds.values()), 2),
    }
    if not args.skip_collect:
        results |= bench_collect(args.attempts)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
