"""rome-bench throughput: oracle trials per hour at concurrency 1 and 4 on the same tasks, in one run.

Images are built first and not timed. Prints the scaling ratio (throughput at 4 / at 1), the harness's own
overhead per trial (time not spent in build, agent or verifier: sandbox start and teardown, uploads, result
writing) and a final JSON line. `--validate-all` also validates the whole suite (oracle passes, nop fails).

    .venv/bin/python benchmarks/bench_throughput.py [--tasks 8] [--sandbox rock|docker] [--validate-all]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from rome.bench.cli import DEFAULT_TASKS
from rome.bench.runner import build_all, run_trials, sandbox_provider
from rome.bench.validate import validate_tasks
from rome.terminal_tasks.task import load_tasks


def measure(tasks, provider, concurrency: int, out: Path) -> dict:  # type: ignore[no-untyped-def]
    started = time.monotonic()
    trials = run_trials(tasks, "oracle", out, n_attempts=1, concurrency=concurrency, provider=provider)
    wall = time.monotonic() - started
    overheads = [t.timings.overhead_sec for t in trials]
    return {
        "concurrency": concurrency,
        "trials": len(trials),
        "passed": sum(t.passed for t in trials),
        "wall_sec": round(wall, 2),
        "trials_per_hour": round(len(trials) / wall * 3600, 1),
        "overhead_sec_mean": round(statistics.mean(overheads), 3),
        "overhead_sec_p50": round(statistics.median(overheads), 3),
        "agent_plus_verifier_sec_mean": round(
            statistics.mean(t.timings.agent_sec + t.timings.verifier_sec for t in trials), 3
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=8, help="how many suite tasks (the first N by id)")
    parser.add_argument("--sandbox", default="rock", choices=["rock", "docker"])
    parser.add_argument("--validate-all", action="store_true", help="also validate the whole suite")
    args = parser.parse_args()

    suite = load_tasks(DEFAULT_TASKS)
    tasks = suite.tasks[: args.tasks]
    result: dict = {
        "benchmark": "rome_bench_throughput",
        "sandbox": args.sandbox,
        "tasks": [t.id for t in tasks],
    }
    with (
        tempfile.TemporaryDirectory(prefix="rome-bench-throughput-") as scratch,
        sandbox_provider(args.sandbox) as provider,
    ):
        t0 = time.monotonic()
        builds = build_all(suite.tasks if args.validate_all else tasks, workers=2, provider=provider)
        failed_builds = {k: v.error for k, v in builds.items() if v.image is None}
        if failed_builds:
            raise SystemExit(f"image builds failed: {failed_builds}")
        result["image_build_sec"] = round(time.monotonic() - t0, 1)
        root = Path(scratch)
        sequential = measure(tasks, provider, 1, root / "c1")
        parallel = measure(tasks, provider, 4, root / "c4")
        result["concurrency_1"], result["concurrency_4"] = sequential, parallel
        result["scaling_ratio"] = round(parallel["trials_per_hour"] / sequential["trials_per_hour"], 2)
        if args.validate_all:
            t1 = time.monotonic()
            report = validate_tasks(
                suite.tasks, suite.errors, root / "validate", concurrency=4, provider=provider
            )
            result["validate_all"] = {
                "tasks": len(report.rows),
                "ok": sum(r.ok for r in report.rows),
                "violations": {r.task_id: r.problem for r in report.rows if not r.ok},
                "malformed": [str(e) for e in report.load_errors],
                "wall_sec": round(time.monotonic() - t1, 1),
            }
    for row in (sequential, parallel):
        print(
            f"concurrency {row['concurrency']}: {row['trials']} trials ({row['passed']} passed) in "
            f"{row['wall_sec']:.1f} s = {row['trials_per_hour']:.0f} trials/h; harness overhead per trial "
            f"{row['overhead_sec_mean']:.2f} s (agent + verifier {row['agent_plus_verifier_sec_mean']:.2f} s)"
        )
    print(f"scaling ratio (concurrency 4 / 1): {result['scaling_ratio']:.2f}x")
    if "validate_all" in result:
        v = result["validate_all"]
        print(f"suite validation: {v['ok']}/{v['tasks']} tasks ok, violations {v['violations']}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
