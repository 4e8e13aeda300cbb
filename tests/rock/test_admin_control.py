"""Heartbeats and /health never queue behind creates (issue 28): the admin's control listener answers them on
a thread of its own while the main event loop is busy.

Ordering, not wall time: a heartbeat is answered while the main loop is provably still blocked, and while a
burst of 10,000 creates is provably still under way.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime

import httpx
import pytest

from rock.admin.auth import LOCAL
from rock.fleet import short_tmp
from rock.sdk.types import CreateGroupRequest, WorkerCapacity
from rock.worker.contract import Heartbeat, HeartbeatReply, heartbeat_url


def _admin(thread):  # type: ignore[no-untyped-def]
    return thread.server.config.app.state.admin


def _beat(admin, worker_id: str, slots: int = 4) -> httpx.Response:  # type: ignore[no-untyped-def]
    """A heartbeat from a worker that is no server (nothing is placed on one of 0 slots)."""
    beat = Heartbeat(
        worker_id=worker_id,
        listed_at=datetime.now(UTC),
        url="http://127.0.0.1:9",
        capacity=WorkerCapacity(cpus=slots, memory=slots * 2**30, slots=slots),
        sandboxes=[],
    )
    return httpx.post(
        heartbeat_url("http://127.0.0.1:1", admin.control_port),
        content=beat.model_dump_json(),
        headers={"Authorization": f"Bearer {admin.auth.worker_token}", "Content-Type": "application/json"},
        timeout=30,
    )


def test_heartbeats_and_health_are_answered_while_the_main_loop_is_blocked(admin_factory):
    thread = admin_factory()
    admin = _admin(thread)
    assert _beat(admin, "w1").status_code == 200  # registered through the main loop (it is free)
    assert "w1" in admin.scheduler.workers
    heard = admin.scheduler.workers["w1"].last_heartbeat

    blocked, release = threading.Event(), threading.Event()

    def hold() -> None:  # the main loop busy, as in a burst of creates
        blocked.set()
        release.wait(120)

    admin.control.main_loop.call_soon_threadsafe(hold)
    assert blocked.wait(30)
    main_health: list[int] = []
    waiting = threading.Thread(
        target=lambda: main_health.append(httpx.get(f"{thread.url}/health", timeout=60).status_code)
    )
    waiting.start()
    try:
        reply = _beat(admin, "w1")
        assert reply.status_code == 200
        assert HeartbeatReply.model_validate_json(reply.content).heartbeat_port == admin.control_port
        assert admin.scheduler.workers["w1"].last_heartbeat > heard  # proof of life taken at once
        health = httpx.get(f"http://127.0.0.1:{admin.control_port}/health", timeout=30).json()
        assert health["workers"] == 1
        assert not release.is_set() and main_health == []  # all of it while the main loop was still held
        assert admin.control.late == 1  # the answer went without the main loop's reconciliation
    finally:
        release.set()
        waiting.join(60)
    assert main_health == [200]


@pytest.mark.slow
def test_a_heartbeat_is_answered_while_a_10000_create_burst_is_under_way(admin_factory):
    thread = admin_factory(max_waiting=20_000)
    admin = _admin(thread)
    folder = short_tmp("rock-burst-")
    latencies = folder / "latencies.json"
    latencies.write_text(json.dumps({"start": [0.2], "remove": [0.0]}))
    command = [sys.executable, "-m", "rock.worker.simulated", "--admin", thread.url, "--count", "4"]
    command += ["--prefix", f"burst{os.getpid()}", "--latencies", str(latencies), "--slots", "2500"]
    command += ["--stats", str(folder / "stats.json"), "--heartbeat-interval", "0.5"]
    worker = subprocess.Popen(command, env={**os.environ, "ROCK_WORKER_TOKEN": admin.auth.worker_token})
    try:
        for _ in range(600):
            if len(admin.scheduler.workers) == 4:
                break
            time.sleep(0.05)
        loop = admin.control.main_loop
        request = CreateGroupRequest(count=100, image="busybox", cpus=0.5, memory="64m", queue_timeout=600)
        # 100 groups of 100: 10,000 creates at once on the admin's loop.
        burst = [
            asyncio.run_coroutine_threadsafe(admin.create_group(request, LOCAL), loop) for _ in range(100)
        ]
        for _ in range(60_000):
            if admin.live_count >= 5_000:  # well into the burst
                break
            time.sleep(0.01)
        assert _beat(admin, "probe", slots=0).status_code == 200
        running_then = sum(f.done() for f in burst)
        assert running_then < len(burst)  # answered before the burst was over
        results = [f.result(timeout=600) for f in burst]
        assert sum(r.running for r in results) == 10_000
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)


def test_a_malformed_heartbeat_is_refused_plainly(admin_factory):
    admin = _admin(admin_factory())
    url = heartbeat_url("http://127.0.0.1:1", admin.control_port)
    response = httpx.post(
        url,
        content=b'{"worker_id": 3}',
        headers={"Authorization": f"Bearer {admin.auth.worker_token}", "Content-Type": "application/json"},
        timeout=30,
    )
    assert response.status_code == 422 and "invalid heartbeat" in response.json()["message"]
    unauthorized = httpx.post(url, content=b"{}", timeout=30)
    assert unauthorized.status_code == 401
