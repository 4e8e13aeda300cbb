"""ROCK sandbox latency against raw Docker, measured in one run on the same image.

1. create-to-first-command: `Sandbox(...)` + `.run("true")` vs the docker SDK's `containers.run` +
   `exec_run("true")`, 20 sequential and 50 concurrent (P50, P99, successes).
2. command round trip in a live session (`sandbox.run`) vs `exec_run` of the same command in a running
   container.

Prints the ratios (goal: create P50 ≤ 1.5x raw Docker, all 50 concurrent creates succeed, round trip
≤ 0.5x) and a final JSON line. Usage: python benchmarks/rock_sandbox.py [--image python:3.11] [--commands 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import docker

from rock.fleet import LocalFleet, short_tmp
from rock.images import resolve_image
from rock.sdk.sandbox import AsyncSandbox, Sandbox

LIMITS = {"cpus": 0.25, "memory": "256m"}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def summary(values: list[float], total: int) -> dict[str, float]:
    return {"p50": percentile(values, 50), "p99": percentile(values, 99), "ok": len(values), "n": total}


# raw docker ----------------------------------------------------------------------------------------------
def docker_create_and_exec(client: docker.DockerClient, image: str, label: str) -> float:
    began = time.perf_counter()
    container = client.containers.run(
        image,
        ["sleep", "infinity"],
        detach=True,
        user="1000:1000",
        network_mode="none",
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        mem_limit="256m",
        nano_cpus=250_000_000,
        pids_limit=256,
        labels={"rock.benchmark": label},
    )
    result = container.exec_run(["true"])
    took = time.perf_counter() - began
    container.remove(force=True)
    if result.exit_code != 0:
        raise RuntimeError(f"exec_run failed: {result.output!r}")
    return took


def docker_round_trips(client: docker.DockerClient, image: str, label: str, count: int) -> list[float]:
    container = client.containers.run(
        image,
        ["sleep", "infinity"],
        detach=True,
        user="1000:1000",
        network_mode="none",
        labels={"rock.benchmark": label},
    )
    try:
        times = []
        for _ in range(count):
            began = time.perf_counter()
            container.exec_run(["sh", "-c", "echo hi"])
            times.append(time.perf_counter() - began)
        return times
    finally:
        container.remove(force=True)


# rock ----------------------------------------------------------------------------------------------------
def rock_create_and_run(url: str, image: str) -> float:
    began = time.perf_counter()
    sandbox = Sandbox(image, admin_url=url, **LIMITS)
    sandbox.run("true")
    took = time.perf_counter() - began
    sandbox.close()
    return took


async def rock_concurrent(url: str, image: str, count: int) -> list[float]:
    async def one() -> float:
        began = time.perf_counter()
        sandbox = AsyncSandbox(image, admin_url=url, queue_timeout=300, **LIMITS)
        await sandbox.start()
        try:
            await sandbox.run("true")
            return time.perf_counter() - began
        finally:
            await sandbox.close()

    results = await asyncio.gather(*(one() for _ in range(count)), return_exceptions=True)
    failures = [r for r in results if isinstance(r, BaseException)]
    for failure in failures[:3]:
        print(f"  rock concurrent create failed: {failure!r}")
    return [r for r in results if isinstance(r, float)]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--image", default="python:3.11")
    parser.add_argument("--sequential", type=int, default=20)
    parser.add_argument("--concurrent", type=int, default=50)
    parser.add_argument("--commands", type=int, default=200)
    args = parser.parse_args()
    image = resolve_image(args.image)
    label = uuid.uuid4().hex[:8]
    client = docker.from_env(max_pool_size=64)
    fleet = LocalFleet(short_tmp("rock-bench-"), f"bench-{label}")
    fleet.admin.args += ["--worker-slots", str(max(64, args.concurrent))]
    fleet.admin.start()
    results: dict[str, object] = {"image": image}
    try:
        fleet.wait_for_workers()
        rock_create_and_run(fleet.url, image)  # warm-up: first use of the image and runtime
        docker_create_and_exec(client, image, label)

        print(f"create-to-first-command, {args.sequential} sequential ...")
        raw_seq = [docker_create_and_exec(client, image, label) for _ in range(args.sequential)]
        rock_seq = [rock_create_and_run(fleet.url, image) for _ in range(args.sequential)]

        print(f"create-to-first-command, {args.concurrent} concurrent ...")
        with ThreadPoolExecutor(args.concurrent) as pool:
            futures = [
                pool.submit(docker_create_and_exec, client, image, label) for _ in range(args.concurrent)
            ]
            raw_conc = [f.result() for f in futures if f.exception() is None]
        rock_conc = asyncio.run(rock_concurrent(fleet.url, image, args.concurrent))

        print(f"command round trip, {args.commands} commands ...")
        raw_rt = docker_round_trips(client, image, label, args.commands)
        with Sandbox(image, admin_url=fleet.url, **LIMITS) as sandbox:
            sandbox.run("true")
            rock_rt = []
            for _ in range(args.commands):
                began = time.perf_counter()
                sandbox.run("echo hi")
                rock_rt.append(time.perf_counter() - began)
    finally:
        fleet.close()
        for container in client.containers.list(all=True, filters={"label": f"rock.benchmark={label}"}):
            container.remove(force=True)

    rows = [
        ("sequential create", summary(rock_seq, args.sequential), summary(raw_seq, args.sequential)),
        ("concurrent create", summary(rock_conc, args.concurrent), summary(raw_conc, args.concurrent)),
        ("session round trip", summary(rock_rt, args.commands), summary(raw_rt, args.commands)),
    ]
    header = ("rock p50", "rock p99", "docker p50", "docker p99", "p50 ratio")
    print("\n" + " " * 20 + "".join(f"{h:>12}" for h in header) + "  ok")
    for name, ours, theirs in rows:
        ratio = ours["p50"] / theirs["p50"]
        cells = [f"{v * 1000:10.1f}ms" for v in (ours["p50"], ours["p99"], theirs["p50"], theirs["p99"])]
        counts = f"{ours['ok']}/{ours['n']} vs {theirs['ok']}/{theirs['n']}"
        print(f"{name:20}" + "".join(cells) + f"{ratio:11.2f}x  {counts}")
        key = name.replace(" ", "_")
        results[key] = {"rock": ours, "docker": theirs, "p50_ratio": ratio}
    seq, conc, rt = (results[k] for k in ("sequential_create", "concurrent_create", "session_round_trip"))
    results["goals"] = {
        "create_p50_within_1.5x": seq["p50_ratio"] <= 1.5 and conc["p50_ratio"] <= 1.5,  # type: ignore[index]
        "all_concurrent_ok": conc["rock"]["ok"] == args.concurrent,  # type: ignore[index]
        "round_trip_within_0.5x": rt["p50_ratio"] <= 0.5,  # type: ignore[index]
    }
    print(json.dumps(results))


if __name__ == "__main__":
    main()
