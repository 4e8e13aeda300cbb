"""Several workers behind one admin, on real Docker (issue 20): two worker processes on one host, a worker
killed while creates keep coming, and the containers of a worker lost for good."""

from __future__ import annotations

import signal
import time
import uuid
from collections import Counter
from collections.abc import Iterator

import pytest

from rock.fleet import LocalFleet, short_tmp
from rock.sdk.sandbox import Sandbox
from rock.sdk.types import SandboxState

pytestmark = [pytest.mark.docker, pytest.mark.slow]
SMALL = {"cpus": 0.25, "memory": "128m", "ttl": 300}


@pytest.fixture
def two_worker_fleet() -> Iterator[LocalFleet]:
    """An admin without a local worker; two `rock worker serve` processes on one state folder, no --id."""
    from rock.images import ensure_base_images

    ensure_base_images()
    fleet = LocalFleet(short_tmp("rock-2w-"), f"2w-{uuid.uuid4().hex[:6]}", local_worker=False)
    shared = fleet.state_dir / "w"
    first = fleet.add_worker(None, state_dir=shared, slots=8)
    second = fleet.add_worker(None, state_dir=shared, slots=8)
    fleet.admin.start()
    first.start()
    second.start()
    try:
        fleet.wait_for_workers(2)
        yield fleet
    finally:
        fleet.close()


def test_two_workers_on_one_host_register_apart_and_keep_their_sandboxes(two_worker_fleet):
    fleet = two_worker_fleet
    assert len({w["id"] for w in fleet.registered()}) == 2
    sandboxes = [Sandbox("busybox", admin_url=fleet.url, **SMALL) for _ in range(4)]
    try:
        assert sorted(Counter(s.info.worker_id for s in sandboxes).values()) == [2, 2]
        time.sleep(5)  # two heartbeats of each worker: none may mark the other's sandboxes lost
        for sandbox in sandboxes:
            assert sandbox.refresh().state is SandboxState.RUNNING, sandbox.info.detail
            assert sandbox.exec("echo ok").output.strip() == "ok"
    finally:
        for sandbox in sandboxes:
            sandbox.close()


def test_creates_skip_a_killed_worker_at_once(two_worker_fleet):
    fleet = two_worker_fleet
    victim = min(fleet.registered(), key=lambda w: w["id"])  # placement breaks ties by id: it is picked first
    started = [p for p in fleet.workers if p.proc is not None]
    dead = next(p for p in started if f"worker {victim['id']} listens" in p.log.read_text())
    dead.stop(signal.SIGKILL)
    sandboxes = []
    try:
        for _ in range(4):  # well inside the 15 s heartbeat timeout: the admin still lists the dead worker
            sandboxes.append(Sandbox("busybox", admin_url=fleet.url, **SMALL))
        assert {s.info.worker_id for s in sandboxes} == {w["id"] for w in fleet.registered()} - {victim["id"]}
        assert all(s.refresh().state is SandboxState.RUNNING for s in sandboxes)
    finally:
        for sandbox in sandboxes:
            sandbox.close()
