"""ROCK's control plane at fleet scale: the admin on PostgreSQL with simulated workers, creating thousands of
sandboxes at once.

1. Measures real Docker on this machine: create + start, and remove, of a `--network none` busybox container
   (sequential samples). These latencies drive the workers' `SimulatedRuntime` (rock.worker.simulated).
2. Starts a throwaway PostgreSQL (rock.local_postgres), `rock admin serve --no-local-worker` on it, and
   WORKERS simulated workers: real processes (PER_PROCESS workers each, every one with its own id, HTTP server
   and heartbeat loop) speaking the admin↔worker contract with the worker credential.
3. For each round size N (default 10,000 then 16,000): N creates submitted at once from one client process
   (at most --connections HTTP connections; a create's time counts from its submission, so waiting for a
   connection counts). Sandboxes stay: the second round runs on a fleet already holding the first's (the
   workers have room for all), and the throwaway database and processes go at the end.

Prints per round: admission decisions per second (creates answered / wall time of the burst), create P50/P99
end to end, and of control-plane time (end to end minus the simulated start latency that sandbox waited), next
to ROCK's published P50 of 40 s at 16,000 (its paper; their cluster, real containers, not run here), and a
final JSON line. Goal: control-plane P99 < 10 s at 16,000.

Usage: python benchmarks/rock_control_plane.py [--workers 100] [--per-process 25] [--rounds 10000,16000]
  [--server-stack plain|fast]. A round `16000x8` submits 16,000 sandboxes as 2,000 group creates of 8. Each
  round also prints /health's wait on the admin's main port and on its control listener (probed from a process
  of its own), the admin's CPU milliseconds per create, and ROCK's published P50/P99 beside a round of its
  size. Figures from 2026-12-02 (after issue 28) are in docs/results.md.

Measured 2026-12-01 18:34 UTC on the shared 2-core machine while a training and other tests ran (load
average 7-9; Docker create+start P50 0.22 s), 100 workers, 1,000 connections, defaults otherwise:

  round   created  lost  decisions/s  end to end P50/P99  control plane P50/P99  /health P50/max
  10,000  10,000   0     121          47.3 / 81.2 s       47.1 / 81.0 s          0.81 / 2.84 s
  16,000  16,000   0     68           138.9 / 234.0 s     138.7 / 233.8 s        0.96 / 6.60 s

(/health: how long the admin took to answer a request with no work while the round ran, as a heartbeat waits.)
CPU seconds in the round, client / admin / workers / PostgreSQL / all other processes: 31 / 37 / 17 / 1 / 79
of 165 (2 cores x wall) at 10,000, and 63 / 117 / 54 / 2 / 227 of 473 at 16,000. Three more runs that hour
(two before a late worker was first asked whether it runs), all creates made and no worker lost in any, gave
48-67 decisions/s at 10,000 and 59-90 at 16,000 while other processes took 45-65% of the CPU; the worst
/health wait was 14.5 s (load 14).

ROCK publishes P50 40 s at 16,000 on its cluster. The goal (control-plane P99 < 10 s at 16,000) is not met
here, and cannot be on this machine: a create's control-plane time is mostly its wait behind the creates
submitted before it, so P99 is close to the burst's wall time, and one create costs 4-7 ms of admin CPU, 3-4
of client and 2-4 of worker CPU (Python HTTP on every hop): 10-15 ms in all. 16,000 in 10 s needs 1,600
creates/s, about 10 times what 2 idle cores give at that cost and 15-30 times what this shared machine gave.
During a burst the admin's event loop is busy ~96% of the time (py-spy, 10,000 round): 42% in its HTTP call to
the worker (httpx), ~31% in FastAPI's handling of the create (routing, dependencies, validation,
serialization), ~10% in uvicorn's HTTP/1.1 parsing, 8% placement, 2% the monitor; heartbeats under 1%; the
batched store writes ~3% of a core on their thread.

Before (same machine, 2,000 at once): the admin wrote each state change to PostgreSQL on its event loop (29%
of its loop time) and one httpx pool for all workers rescanned its connections on every change (34%): 19
decisions/s, control-plane P99 106 s, and 352 of 2,000 creates failed (503 and 429: at 1,000 and 1,600 the
admin's log showed workers declared lost as their heartbeats queued behind creates). After: 125 decisions/s,
P99 14.8 s, none failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import docker
import httpx
import psutil

from rock.fleet import LocalFleet, short_tmp
from rock.images import resolve_image
from rock.local_postgres import LocalPostgres
from rock.serving import STACKS, server_stack

ROCK_PUBLISHED_P50_AT_16K = 40.0
ROCK_PUBLISHED = {1000: (4.93, 8.69), 4000: (7.05, 13.34), 8000: (17.86, 32.03), 16000: (39.98, 60.11)}
"""ROCK's own sandbox create benchmark (its docs, v1.11, its cluster, real containers): N -> (P50, P99) s."""
CLIENT_POOL = 10
"""Connections per httpx pool of the client: a pool checks each connection it holds (a syscall each) on every
request, so 50 a pool made the client spend ~4 ms of CPU per create, on the cores the admin needs."""
PROBE_INTERVAL = 0.5
REST_SECONDS = 5.0
"""Seconds the admin's CPU is measured at rest (heartbeats, its monitor) before each round: what a round's
CPU per create is taken net of, so a round made slow by other load does not look dearer per create."""
SPEC = {"image": "busybox", "cpus": 0.5, "memory": "256m", "ttl": 3600, "queue_timeout": 600}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))] if ordered else float("nan")


def measure_docker(samples: int) -> dict[str, list[float]]:
    """Create + start and remove latencies of a busybox container on this machine's Docker."""
    client = docker.from_env()
    image, label = resolve_image("busybox", client=client), f"bench-cp-{uuid.uuid4().hex[:6]}"
    start, remove = [], []
    try:
        for _ in range(samples):
            began = time.monotonic()
            container = client.api.create_container(
                image,
                command=["sleep", "300"],
                labels={"ale.bench": label},
                host_config=client.api.create_host_config(network_mode="none", mem_limit="256m"),
            )
            client.api.start(container["Id"])
            start.append(time.monotonic() - began)
            began = time.monotonic()
            client.api.remove_container(container["Id"], force=True)
            remove.append(time.monotonic() - began)
    finally:
        for c in client.api.containers(all=True, filters={"label": f"ale.bench={label}"}):
            client.api.remove_container(c["Id"], force=True)
        client.close()
    return {"start": start, "remove": remove}


Answers = list[tuple[float, str | None, str]]


async def burst(
    url: str, count: int, connections: int, group: int, parts: dict[str, list[int]]
) -> tuple[Answers, tuple[list[float], list[float]], float, dict[str, float]]:
    """Submit `count` creates at once (as group creates of `group` when it is over 1): (seconds to answer,
    sandbox id or None, outcome) each, the seconds the admin took to answer `/health` every PROBE_INTERVAL
    meanwhile, on its main port (a request with no work of its own waits in the main event loop) and on its
    control listener (where heartbeats go: rock.admin.control), the burst's wall time (first submission to
    last answer) and the CPU seconds `parts` used in it."""
    # httpx's pool rescans every connection it holds and every request queued in it on each change: with
    # 1,000 connections in one pool, or thousands queued, that starved the client's CPU. So the connections
    # are spread over pools of CLIENT_POOL, and the requests beyond them wait on a semaphore per pool.
    pools = [
        (
            httpx.AsyncClient(
                limits=httpx.Limits(max_connections=size, max_keepalive_connections=size),
                timeout=httpx.Timeout(900.0),
            ),
            asyncio.Semaphore(size),
        )
        for size in _split(connections, CLIENT_POOL)
    ]

    async def one(http: httpx.AsyncClient, gate: asyncio.Semaphore) -> Answers:
        """One create request (a group of `group` when group > 1): an answer per sandbox asked for."""
        began = time.monotonic()
        size = max(group, 1)
        try:
            async with gate:
                if group > 1:
                    response = await http.post(f"{url}/v1/sandbox-groups", json={**SPEC, "count": group})
                else:
                    response = await http.post(f"{url}/v1/sandboxes", json=SPEC)
        except httpx.HTTPError as exc:
            return [(time.monotonic() - began, None, type(exc).__name__)] * size
        elapsed = time.monotonic() - began
        if response.status_code != 201:
            return [(elapsed, None, f"HTTP {response.status_code}")] * size
        if group <= 1:
            return [(elapsed, response.json()["id"], "ok")]
        return [
            (elapsed, m["id"], "ok") if m["sandbox"] else (elapsed, None, m["error"]["type"])
            for m in response.json()["members"]
        ]

    control_port = httpx.get(f"{url}/health", timeout=30).json()["control_port"]
    # The probes run in a process of their own: in this one they would wait behind the burst's own
    # callbacks in the client's event loop, and time the client instead of the admin.
    spawn = multiprocessing.get_context("spawn")
    done, waits, ready = spawn.Event(), spawn.Queue(), spawn.Semaphore(0)
    probes = [
        spawn.Process(target=probe, args=(health, done, waits, ready, i))
        for i, health in enumerate((f"{url}/health", f"http://127.0.0.1:{control_port}/health"))
    ]
    for process in probes:
        process.start()
    # The burst starts once both probes have their first answer: a process starting under load took longer
    # than a short round, which then had no /health figures and a wall time that counted the probes' start.
    for _ in probes:
        if not await asyncio.to_thread(ready.acquire, True, 300):
            raise RuntimeError(
                "a /health probe did not get its first answer within 300 s; see the admin's log"
            )
    requests = -(-count // max(group, 1))
    before, began = cpu_seconds(parts), time.monotonic()
    try:
        answers = [
            a
            for answered in await asyncio.gather(*(one(*pools[i % len(pools)]) for i in range(requests)))
            for a in answered
        ]
        wall, after = time.monotonic() - began, cpu_seconds(parts)
    finally:
        done.set()
        for http, _ in pools:
            await http.aclose()
    found = dict(waits.get(timeout=900) for _ in probes)
    for process in probes:
        process.join(timeout=60)
    return answers, (found[0], found[1]), wall, {k: after[k] - before[k] for k in after}


def probe(health_url: str, done: Any, waits: Any, ready: Any, index: int) -> None:
    """GET `health_url` every PROBE_INTERVAL until `done` (releasing `ready` after the first); puts (index,
    [seconds each took]) on `waits`."""
    took: list[float] = []
    with httpx.Client(timeout=httpx.Timeout(900.0)) as http:
        http.get(health_url).raise_for_status()
        ready.release()
        while not done.is_set():
            began = time.monotonic()
            http.get(health_url).raise_for_status()
            took.append(time.monotonic() - began)
            done.wait(PROBE_INTERVAL)
    waits.put((index, took))


def _split(total: int, size: int) -> list[int]:
    """`total` in parts of at most `size`: _split(120, 50) == [50, 50, 20]."""
    return [min(size, total - start) for start in range(0, total, size)]


def start_workers(
    fleet: LocalFleet, args: argparse.Namespace, latencies: Path, slots: int
) -> list[tuple[subprocess.Popen[bytes], Path]]:
    processes = []
    for p in range(0, args.workers, args.per_process):
        count = min(args.per_process, args.workers - p)
        stats = fleet.state_dir / f"stats-{p}.json"
        command = [sys.executable, "-m", "rock.worker.simulated", "--admin", fleet.url, "--count", str(count)]
        command += ["--prefix", f"sim{p}", "--latencies", str(latencies), "--slots", str(slots)]
        command += ["--stats", str(stats)]
        log = (fleet.state_dir / f"sim-{p}.log").open("ab")
        env = {**os.environ, "ROCK_WORKER_TOKEN": fleet.worker_token}
        processes.append((subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env), stats))
    return processes


def stop_workers(processes: list[tuple[subprocess.Popen[bytes], Path]]) -> None:
    for process, _ in processes:
        process.send_signal(signal.SIGTERM)
    for process, _ in processes:
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def read_stats(processes: list[tuple[subprocess.Popen[bytes], Path]]) -> dict[str, float]:
    """Each simulated sandbox's start latency, as the worker processes last wrote them (SIGUSR1)."""
    for process, _ in processes:
        process.send_signal(signal.SIGUSR1)
    time.sleep(3)
    simulated: dict[str, float] = {}
    for _, stats in processes:
        if stats.exists():
            simulated.update(json.loads(stats.read_text()))
    return simulated


def cpu_seconds(parts: dict[str, list[int]]) -> dict[str, float]:
    """CPU seconds (user + system) used so far by each part's processes (with their children, but the
    client's own process alone) and by the whole machine ("machine"), to tell where a round's time went."""
    used = {}
    for name, pids in parts.items():
        total = 0.0
        for pid in pids:
            try:
                process = psutil.Process(pid)
                family = [process] if name == "client" else [process, *process.children(recursive=True)]
            except psutil.NoSuchProcess:
                continue
            for member in family:
                try:
                    times = member.cpu_times()
                except psutil.NoSuchProcess:
                    continue
                total += times.user + times.system
        used[name] = total
    machine = psutil.cpu_times()
    used["machine"] = machine.user + machine.system + machine.nice + machine.irq + machine.softirq
    return used


def report(
    label: str,
    count: int,
    answers: Answers,
    health: tuple[list[float], list[float]],
    wall: float,
    simulated: dict[str, float],
    cpu: dict[str, float],
    rest: dict[str, float],
    results: dict[str, object],
) -> None:
    ok = [(t, sid) for t, sid, outcome in answers if outcome == "ok" and sid]
    e2e = [t for t, _ in ok]
    control = [t - simulated.get(sid, 0.0) for t, sid in ok]
    failures: dict[str, int] = {}
    for _, _, outcome in answers:
        if outcome != "ok":
            failures[outcome] = failures.get(outcome, 0) + 1
    row = {
        "n": count,
        "ok": len(ok),
        "failures": failures,
        "wall_s": wall,
        "decisions_per_s": len(answers) / wall,
        "e2e_p50": percentile(e2e, 50),
        "e2e_p99": percentile(e2e, 99),
        "control_plane_p50": percentile(control, 50),
        "control_plane_p99": percentile(control, 99),
        "health_p50": percentile(health[0], 50),
        "health_max": max(health[0], default=float("nan")),
        "control_health_p50": percentile(health[1], 50),
        "control_health_max": max(health[1], default=float("nan")),
        "admin_cpu_ms_per_create": 1000 * cpu.get("admin", 0.0) / max(len(answers), 1),
        "admin_cpu_ms_per_create_net": 1000
        * max(cpu.get("admin", 0.0) - rest.get("admin", 0.0) * wall, 0.0)
        / max(len(answers), 1),
        "admin_cpu_at_rest": rest.get("admin", 0.0),
        "cpu_s": cpu,
        "cpu_s_per_s_at_rest": rest,
        "cores": os.cpu_count(),
        "load_avg_1m": os.getloadavg()[0],
    }
    results[label] = row
    rock = ROCK_PUBLISHED.get(count) if label == str(count) else None
    print(
        f"{label:>8}: {len(ok)} of {count} ok in {wall:.0f} s, {row['decisions_per_s']:.0f} decisions/s, end "
        f"to end P50 {row['e2e_p50']:.2f} s P99 {row['e2e_p99']:.2f} s, control plane P50 "
        f"{row['control_plane_p50']:.2f} s P99 {row['control_plane_p99']:.2f} s, failures {failures}"
        + (f" (ROCK's report: P50 {rock[0]:.2f} s P99 {rock[1]:.2f} s)" if rock else "")
        + f"; /health meanwhile: main port P50 {row['health_p50']:.2f} s max {row['health_max']:.2f} s, "
        f"control listener P50 {row['control_health_p50']:.3f} s max {row['control_health_max']:.3f} s; "
        f"admin CPU {row['admin_cpu_ms_per_create']:.2f} ms per create, "
        f"{row['admin_cpu_ms_per_create_net']:.2f} net of its "
        f"{1000 * row['admin_cpu_at_rest']:.0f} ms/s at rest",
        flush=True,
    )
    parts = {k: v for k, v in cpu.items() if k != "machine"}
    print(
        f"        CPU seconds in the round ({os.cpu_count()} cores x {wall:.0f} s = "
        f"{(os.cpu_count() or 1) * wall:.0f} available): "
        f"{', '.join(f'{k} {v:.0f}' for k, v in parts.items())}, other processes "
        f"{cpu['machine'] - sum(parts.values()):.0f}; load average {row['load_avg_1m']:.1f}; CPU ms per s at "
        f"rest before it: {', '.join(f'{k} {1000 * v:.0f}' for k, v in rest.items() if k != 'machine')}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=100)
    parser.add_argument("--per-process", type=int, default=25)
    parser.add_argument("--rounds", default="10000,16000")
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--docker-samples", type=int, default=10)
    parser.add_argument(
        "--server-stack",
        choices=sorted(STACKS),
        default=None,
        help="event loop and HTTP parser of the admin and workers (ROCK_SERVER_STACK; fast needs uvloop and "
        "httptools installed)",
    )
    args = parser.parse_args()
    if args.server_stack:
        os.environ["ROCK_SERVER_STACK"] = args.server_stack
    # "4000" is 4,000 single creates at once, "16000x8" 16,000 sandboxes as 2,000 group creates of 8.
    rounds = [(int(n), int(g or 1)) for n, _, g in (r.partition("x") for r in args.rounds.split(","))]
    slots = -(-sum(n for n, _ in rounds) * 5 // (4 * args.workers))  # room for every round, 25% headroom

    latencies = measure_docker(args.docker_samples)
    print(
        f"real Docker here: create+start P50 {percentile(latencies['start'], 50):.3f} s, "
        f"remove P50 {percentile(latencies['remove'], 50):.3f} s ({args.docker_samples} samples)",
        flush=True,
    )
    results: dict[str, object] = {"docker_start_p50": percentile(latencies["start"], 50)}
    with LocalPostgres() as pg:
        url = pg.create_database("rock_control_plane")
        fleet = LocalFleet(short_tmp("rock-cp-"), "unused", local_worker=False, database_url=url)
        with fleet:
            latency_file = fleet.state_dir / "latencies.json"
            latency_file.write_text(json.dumps(latencies))
            processes = start_workers(fleet, args, latency_file, slots)
            try:
                fleet.wait_for_workers(args.workers, timeout=300)
                print(f"{args.workers} simulated workers, {args.per_process} per process, {slots} slots each")
                assert fleet.admin.proc is not None and pg.proc is not None
                parts = {
                    "client": [os.getpid()],
                    "admin": [fleet.admin.proc.pid],
                    "workers": [p.pid for p, _ in processes],
                    "postgres": [pg.proc.pid],
                }
                print(f"server stack: {' + '.join(server_stack())}; load average {os.getloadavg()}")
                for count, group in rounds:
                    label = str(count) if group == 1 else f"{count}x{group}"
                    before = cpu_seconds(parts)
                    time.sleep(REST_SECONDS)
                    after = cpu_seconds(parts)
                    rest = {k: (after[k] - before[k]) / REST_SECONDS for k in after}
                    answers, health, wall, cpu = asyncio.run(
                        burst(fleet.url, count, args.connections, group, parts)
                    )
                    report(label, count, answers, health, wall, read_stats(processes), cpu, rest, results)
            finally:
                stop_workers(processes)
    if "16000" in results:
        ours = results["16000"]["e2e_p50"]  # type: ignore[index]
        p99 = results["16000"]["control_plane_p99"]  # type: ignore[index]
        results["rock_published_p50_at_16k"] = ROCK_PUBLISHED_P50_AT_16K
        results["published_over_ours_p50"] = ROCK_PUBLISHED_P50_AT_16K / ours
        results["goal_cp_p99_under_10s_at_16k"] = p99 < 10.0
        print(
            f"ROCK published P50 {ROCK_PUBLISHED_P50_AT_16K:.0f} s at 16,000 (their cluster, real "
            f"containers); ours end to end {ours:.2f} s with simulated containers: "
            f"{ROCK_PUBLISHED_P50_AT_16K / ours:.1f}x"
        )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
