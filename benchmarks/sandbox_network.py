"""The CPU a sandbox's container costs to start and remove: made as ROCK's worker makes a sandbox without a
network (Docker's networking disabled, the worker's /etc/hosts, /etc/hostname and /etc/resolv.conf bound in:
rock.worker.name_files) against Docker's `--network none`, in one run on the same image.

Each round starts, waits for and removes `--containers` containers each way (a container that runs `true`),
alternating which way goes first, and reads the machine's busy CPU time (/proc/stat) around each batch.

    python benchmarks/sandbox_network.py [--image ale/busybox:latest] [--containers 20] [--rounds 4]

Prints core-seconds and wall seconds a container each way, the ratio and a final JSON line. Needs Docker.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import docker

from rock.worker.name_files import write_name_files


def busy_seconds() -> float:
    """Core-seconds the machine has spent busy (user, nice, system, irq, softirq) since boot."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (fields[0] + fields[1] + fields[2] + fields[5] + fields[6]) / os.sysconf("SC_CLK_TCK")


def run_one(api: docker.APIClient, image: str, offline: bool, files: Path) -> None:
    binds = write_name_files(files, "benchsandbox") if offline else {}
    host = api.create_host_config(
        network_mode="none", cap_drop=["ALL"], security_opt=["no-new-privileges"], binds=binds
    )
    container = api.create_container(
        image,
        command=["true"],
        host_config=host,
        network_disabled=offline,
        hostname="benchsandbox" if offline else None,
    )["Id"]
    api.start(container)
    api.wait(container)
    api.remove_container(container, force=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default="ale/busybox:latest")
    parser.add_argument("--containers", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    api = docker.from_env().api
    ways = {"rock": True, "docker_none": False}
    cpu: dict[str, list[float]] = {name: [] for name in ways}
    wall: dict[str, list[float]] = {name: [] for name in ways}
    with tempfile.TemporaryDirectory(prefix="bench-names-") as folder:
        for offline in ways.values():  # warm-up, untimed
            run_one(api, args.image, offline, Path(folder))
        for round_number in range(args.rounds):
            order = list(ways.items())
            for name, offline in order if round_number % 2 == 0 else order[::-1]:
                started, busy = time.perf_counter(), busy_seconds()
                for _ in range(args.containers):
                    run_one(api, args.image, offline, Path(folder))
                cpu[name].append((busy_seconds() - busy) / args.containers)
                wall[name].append((time.perf_counter() - started) / args.containers)
    result = {
        f"{kind}_{name}_s": round(statistics.median(values[name]), 4)
        for kind, values in (("cpu", cpu), ("wall", wall))
        for name in ways
    }
    ratio = result["cpu_docker_none_s"] / result["cpu_rock_s"]
    load = os.getloadavg()[0]
    print(
        f"{args.containers} containers x {args.rounds} rounds each way on {args.image}, medians a container:"
    )
    for name, label in (("rock", "ROCK offline sandbox"), ("docker_none", "docker --network none")):
        print(f"  {label}: {result[f'cpu_{name}_s']:.3f} core-s, {result[f'wall_{name}_s']:.3f} s")
    print(f"  CPU ratio {ratio:.2f}x; load average {load:.2f}")
    print(json.dumps({**result, "cpu_ratio": round(ratio, 2), "load": load}))


if __name__ == "__main__":
    main()
