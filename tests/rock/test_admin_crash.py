"""An admin killed (-9) while its batched store writes wait on the database: the creates in that batch were
never acknowledged, and the admin started again has exactly the sandboxes it acknowledged (issue 20).

A real `rock admin serve` on a real PostgreSQL, with one simulated worker process (rock.worker.simulated);
the test holds a table lock so the admin's commits wait, as behind a slow or busy database.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from rock.fleet import LocalFleet, short_tmp

pytestmark = pytest.mark.slow


@pytest.fixture
def fleet(local_postgres) -> Iterator[tuple[LocalFleet, str, subprocess.Popen[bytes]]]:
    url = local_postgres.create_database("crash")
    with LocalFleet(short_tmp("rock-crash-"), "unused", local_worker=False, database_url=url) as fleet:
        latencies = fleet.state_dir / "latencies.json"
        latencies.write_text(json.dumps({"start": [0.0], "remove": [0.0]}))
        command = [sys.executable, "-m", "rock.worker.simulated", "--admin", fleet.url, "--count", "1"]
        command += ["--prefix", "crash", "--latencies", str(latencies), "--slots", "16"]
        command += ["--stats", str(fleet.state_dir / "stats.json"), "--heartbeat-interval", "0.5"]
        with (fleet.state_dir / "sim.log").open("ab") as log:
            worker = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "ROCK_WORKER_TOKEN": fleet.worker_token},
            )
        try:
            fleet.wait_for_workers(1, timeout=60)
            yield fleet, url.replace("postgresql+psycopg://", "postgresql://"), worker
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=30)


def _started(worker: subprocess.Popen[bytes], stats: Path) -> set[str]:
    """The sandboxes the simulated worker has started (it writes them on SIGUSR1)."""
    stats.unlink(missing_ok=True)
    worker.send_signal(signal.SIGUSR1)
    for _ in range(100):
        if stats.exists():
            try:
                return set(json.loads(stats.read_text()))
            except ValueError:  # caught mid-write
                pass
        time.sleep(0.05)
    raise AssertionError("the simulated worker wrote no stats")


async def _create(http: httpx.AsyncClient) -> str:
    try:
        response = await http.post("/v1/sandboxes", json={"image": "busybox", "cpus": 0.5})
    except httpx.TransportError as exc:
        return type(exc).__name__
    return response.json()["id"] if response.status_code == 201 else f"HTTP {response.status_code}"


async def test_an_admin_killed_while_its_commit_waits_acknowledged_nothing_of_it(fleet):
    fleet, dsn, worker = fleet
    stats = fleet.state_dir / "stats.json"
    async with httpx.AsyncClient(base_url=fleet.url, timeout=60) as http:
        acknowledged = {await _create(http) for _ in range(2)}
        assert all(len(sid) == 12 for sid in acknowledged)

        with psycopg.connect(dsn) as lock:
            lock.execute("LOCK TABLE sandboxes IN EXCLUSIVE MODE")  # reads go on, writes wait
            creates = [asyncio.create_task(_create(http)) for _ in range(5)]
            for _ in range(600):
                if len(await asyncio.to_thread(_started, worker, stats)) == 7:
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("the 5 creates did not start on the worker")
            await asyncio.sleep(0.5)
            assert not any(c.done() for c in creates)  # started, but their rows are not committed

            fleet.admin.stop(signal.SIGKILL)
            outcomes = await asyncio.gather(*creates)
            assert all(len(o) != 12 for o in outcomes), outcomes  # none acknowledged
            lock.rollback()

    fleet.admin.start()
    fleet.wait_for_workers(1, timeout=60)
    async with httpx.AsyncClient(base_url=fleet.url, timeout=60) as http:
        listed = (await http.get("/v1/sandboxes")).json()
        assert {(i["id"], i["state"]) for i in listed if i["state"] == "running"} == {
            (sid, "running") for sid in acknowledged
        }
