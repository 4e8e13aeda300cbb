"""Several workers behind one admin, on real Docker (issue 20): two worker processes on one host, a worker
killed while creates keep coming, and the containers of a worker lost for good."""

from __future__ import annotations

import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest

from rock.fleet import LocalFleet, labelled_containers, short_tmp
from rock.sdk.errors import CapacityExceeded
from rock.sdk.sandbox import Sandbox
from rock.sdk.types import SandboxState

pytestmark = [pytest.mark.docker, pytest.mark.slow]
SMALL = {"cpus": 0.25, "memory": "128m", "ttl": 300}


@pytest.fixture(params=["sqlite", "postgresql"])
def two_worker_fleet(request) -> Iterator[LocalFleet]:
    """An admin without a local worker; two `rock worker serve` processes on one state folder, no --id."""
    from rock.images import ensure_base_images

    ensure_base_images()
    database_url = None
    if request.param == "postgresql":
        database_url = request.getfixturevalue("local_postgres").create_database(f"f_{uuid.uuid4().hex[:8]}")
    fleet = LocalFleet(
        short_tmp("rock-2w-"), f"2w-{uuid.uuid4().hex[:6]}", local_worker=False, database_url=database_url
    )
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


def test_an_admin_restart_keeps_the_fleet_and_its_sandboxes(two_worker_fleet):
    fleet = two_worker_fleet
    sandboxes = [Sandbox("busybox", admin_url=fleet.url, **SMALL) for _ in range(2)]
    try:
        fleet.admin.stop()
        fleet.admin.start()
        fleet.wait_for_workers(2)
        for sandbox in sandboxes:
            assert sandbox.refresh().state is SandboxState.RUNNING
            assert sandbox.exec("echo back").output.strip() == "back"
    finally:
        for sandbox in sandboxes:
            sandbox.close()


def test_creates_waiting_for_room_fail_explicitly_when_the_admin_stops():
    fleet = LocalFleet(short_tmp("rock-q-"), f"q-{uuid.uuid4().hex[:6]}", local_worker=False)
    with fleet:
        outcome: list[BaseException] = []

        def create() -> None:
            try:
                Sandbox("busybox", admin_url=fleet.url, queue_timeout=120, **SMALL)
            except BaseException as exc:  # the outcome is what this test checks
                outcome.append(exc)

        waiter = threading.Thread(target=create)
        waiter.start()
        deadline = time.monotonic() + 30
        while "rock_admission_waiting 1.0" not in httpx.get(f"{fleet.url}/metrics").text:
            assert time.monotonic() < deadline, "the create never queued"
            time.sleep(0.1)
        fleet.admin.stop()
        waiter.join(timeout=60)
    assert len(outcome) == 1 and isinstance(outcome[0], CapacityExceeded), outcome
    assert "the admin stopped" in str(outcome[0]) and "nothing was created" in str(outcome[0])


def test_a_worker_lost_for_good_has_its_containers_reaped_by_its_host():
    fleet = LocalFleet(
        short_tmp("rock-lost-"),
        f"lost-{uuid.uuid4().hex[:6]}",
        local_worker=False,
        admin_args=["--heartbeat-timeout", "3"],
    )
    lost, survivor = fleet.add_worker("a-" + fleet.worker_id), fleet.add_worker("b-" + fleet.worker_id)
    with fleet:
        lost.start()
        fleet.wait_for_workers(1)
        sandbox = Sandbox("busybox", admin_url=fleet.url, **SMALL)
        survivor.start()
        fleet.wait_for_workers(2)
        lost.stop(signal.SIGKILL)
        deadline = time.monotonic() + 30
        while sandbox.refresh().state is SandboxState.RUNNING:
            assert time.monotonic() < deadline, "the admin never noticed the lost worker"
            time.sleep(0.2)
        assert sandbox.info.failure_reason == "worker_lost"
        while labelled_containers("a-" + fleet.worker_id):
            assert time.monotonic() < deadline, "the lost worker's container is still there"
            time.sleep(0.2)
        assert labelled_containers("b-" + fleet.worker_id) == set()
