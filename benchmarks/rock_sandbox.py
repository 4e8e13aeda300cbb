"""ROCK sandbox latency against raw Docker, measured in one run on the same image.

1. create-to-first-command: `Sandbox(...)` + `.run("true")` vs the docker SDK's `containers.run` +
   `exec_run("true")`, 20 sequential and 50 concurrent (P50, P99, successes); and from the admin's warm pool
   (`rock admin serve --warm IMAGE=N`, a create of the default spec takes a started sandbox), sequential,
   each take once the pool has refilled (goal: P50 <= 0.25x raw Docker's create + exec).
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
import httpx

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
def rock_create_and_run(url: str, image: str, warm: bool = False) -> float:
    """Create (with LIMITS, or the default spec a warm pool holds), run one command, delete."""
    began = time.perf_counter()
    sandbox = Sandbox(image, admin_url=url) if warm else Sandbox(image, admin_url=url, **LIMITS)
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


def wait_for_pool(fleet: LocalFleet, image: str, size: int) -> None:
    for _ in range(3000):
        if fleet.health().get("warm", {}).get(image, 0) >= size:
            return
        time.sleep(0.05)
    raise RuntimeError(f"the warm pool of {image} did not refill to {size}; see {fleet.state_dir}")


def pool_hits(url: str) -> float:
    for line in httpx.get(f"{url}/metrics", timeout=10).text.splitlines():
        if line.startswith('rock_warm_pool_takes_total{outcome="hit"}'):
            return float(line.split()[-1])
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--image", default="python:3.11")
    parser.add_argument("--sequential", type=int, default=20)
    parser.add_argument("--concurrent", type=int, default=50)
    parser.add_argument("--commands", type=int, default=200)
    parser.add_argument("--warm", type=int, default=4, help="the warm pool's size (0: no pool row)")
    args = parser.parse_args()
    image = resolve_image(args.image)
    label = uuid.uuid4().hex[:8]
    client = docker.from_env(max_pool_size=64)
    fleet = LocalFleet(short_tmp("rock-bench-"), f"bench-{label}")
    fleet.admin.args += ["--worker-slots", str(max(64, args.concurrent + args.warm))]
    fleet.admin.args += ["--warm", f"{args.image}={args.warm}"] if args.warm else []
    fleet.admin.start()
    results: dict[str, object] = {"image": image}
    try:
        fleet.wait_for_workers()
        rock_create_and_run(fleet.url, image)  # warm-up: first use of the image and runtime
        docker_create_and_exec(client, image, label)

        print(f"create-to-first-command, {args.sequential} sequential ...")
        raw_seq = [docker_create_and_exec(client, image, label) for _ in range(args.sequential)]
        rock_seq = [rock_create_and_run(fleet.url, image) for _ in range(args.sequential)]

        rock_warm = []
        if args.warm:
            print(f"create-to-first-command from the warm pool, {args.sequential} sequential ...")
            for _ in range(args.sequential):
                wait_for_pool(fleet, args.image, args.warm)
                # The pool's spec names the image as the operator wrote it (--warm IMAGE=N).
                rock_warm.append(rock_create_and_run(fleet.url, args.image, warm=True))
            results["warm_pool_hits"] = pool_hits(fleet.url)

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
        *(
            [("warm pool create", summary(rock_warm, args.sequential), summary(raw_seq, args.sequential))]
            if rock_warm
            else []
        ),
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
    if "warm_pool_create" in results:
        warm = results["warm_pool_create"]
        results["goals"]["warm_p50_within_0.25x"] = warm["p50_ratio"] <= 0.25  # type: ignore[index]
        results["goals"]["warm_p50_under_90ms"] = warm["rock"]["p50"] < 0.090  # type: ignore[index]
        hits = results["warm_pool_hits"]
        print(f"warm pool: {hits:.0f} of {args.sequential} creates took a started sandbox")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
