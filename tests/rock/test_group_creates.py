"""Group creates (issue 28): one request for N sandboxes of one spec, each admitted, placed and started on its
own, each worker called once for its share, the partial result said plainly.

A real admin (in this process, so the test can watch the calls it makes to its workers) and real simulated
worker processes (rock.worker.simulated: the admin↔worker contract over HTTP, sandboxes in memory).
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

import httpx
import pytest

from rock.admin.config import KeyPolicy
from rock.fleet import AdminThread, short_tmp
from rock.sdk.errors import CapacityExceeded, QuotaExceeded
from rock.sdk.sandbox import AsyncSandbox, Sandbox
from rock.worker.contract import GROUP_PATH

KEY = "k" * 24


def _admin(thread: AdminThread):  # type: ignore[no-untyped-def]
    return thread.server.config.app.state.admin


@pytest.fixture
def simulated_fleet(admin_factory) -> Iterator[tuple[AdminThread, list[tuple[str, str]]]]:
    """An admin (one API key, quota 7 sandboxes) with two simulated workers of 3 slots each; yields the admin
    and the (worker id, path) of every POST the admin makes to its workers."""
    thread = admin_factory(api_keys=[KeyPolicy(name="team", key=KEY, max_sandboxes=7)])
    admin = _admin(thread)
    posts: list[tuple[str, str]] = []
    send = admin.calls.send

    async def spy(worker_id, url, method, path, **kwargs):  # type: ignore[no-untyped-def]
        if method == "POST":
            posts.append((worker_id, path))
        return await send(worker_id, url, method, path, **kwargs)

    admin.calls.send = spy
    folder = short_tmp("rock-group-")
    latencies = folder / "latencies.json"
    latencies.write_text(json.dumps({"start": [0.01], "remove": [0.0]}))
    command = [sys.executable, "-m", "rock.worker.simulated", "--admin", thread.url, "--count", "2"]
    command += ["--prefix", f"grp{os.getpid()}", "--latencies", str(latencies), "--slots", "3"]
    command += ["--stats", str(folder / "stats.json"), "--heartbeat-interval", "0.5"]
    with (folder / "sim.log").open("ab") as log:
        worker = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "ROCK_WORKER_TOKEN": admin.auth.worker_token},
        )
    try:
        for _ in range(600):
            if httpx.get(f"{thread.url}/health", timeout=5).json()["workers"] == 2:
                break
            assert worker.poll() is None, (folder / "sim.log").read_text()
            time.sleep(0.05)
        yield thread, posts
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)


def test_a_group_larger_than_the_room_runs_what_fits_and_says_why_the_rest_did_not(simulated_fleet):
    thread, posts = simulated_fleet
    group = Sandbox.group(8, "busybox", admin_url=thread.url, api_key=KEY, cpus=0.5, queue_timeout=0)
    try:
        # 6 slots: 6 run, one member waits for room it never gets (queue_timeout 0), one is over the quota.
        assert len(group.sandboxes) == 6 and len(group.failed) == 2
        assert {m.error.type for m in group.failed if m.error} == {"CapacityExceeded", "QuotaExceeded"}
        assert group.summary.startswith("6 of 8 sandboxes running; 2 not: ")
        assert "quota 7" in group.summary
        assert isinstance(group.first_error(), CapacityExceeded | QuotaExceeded)
        assert len({s.id for s in group.sandboxes} | {m.id for m in group.failed}) == 8
        # Placement decided the group at once: one call per worker for its share of three.
        assert sorted(posts) == sorted({(w, GROUP_PATH) for w, _ in posts}) and len(posts) == 2
        assert sorted(s.info.worker_id for s in group.sandboxes).count(posts[0][0]) == 3
        for sandbox in group.sandboxes:
            assert sandbox.refresh().state == "running"
        metrics = httpx.get(f"{thread.url}/metrics", headers={"Authorization": f"Bearer {KEY}"}).text
        assert "rock_group_creates_total 1.0" in metrics
        assert "rock_group_create_size_sum 8.0" in metrics
        assert 'rock_sandbox_creates_total{outcome="running"} 6.0' in metrics
    finally:
        for sandbox in group.sandboxes:
            sandbox.close()


async def test_the_async_sdk_makes_a_group_and_its_members_work_alone(simulated_fleet):
    thread, posts = simulated_fleet
    group = await AsyncSandbox.group(3, "busybox", admin_url=thread.url, api_key=KEY, cpus=0.5)
    try:
        assert group.complete and group.summary == "3 of 3 sandboxes running"
        # Packed onto the worker with the most room while it has room: one call, not one per member.
        assert len({s.info.worker_id for s in group.sandboxes}) == 1 and len(posts) == 1
        await group.sandboxes[0].close()  # one member deleted leaves the others running
        assert (await group.sandboxes[1].refresh()).state == "running"
    finally:
        for sandbox in group.sandboxes[1:]:
            await sandbox.close()


def test_a_single_create_is_a_group_of_one(simulated_fleet):
    thread, posts = simulated_fleet
    with Sandbox("busybox", admin_url=thread.url, api_key=KEY, cpus=0.5) as sandbox:
        assert sandbox.info.state == "running"
        assert posts == [(sandbox.info.worker_id, GROUP_PATH)]


async def test_single_creates_at_once_share_one_call_per_worker_and_each_ends_on_its_own(simulated_fleet):
    """Creates submitted at once, each a request of its own, start in one call per worker (rock.admin.shares):
    placement packs them onto the worker whose share is being gathered. The ones that find no room fail
    alone, and each caller gets its own sandbox."""
    thread, posts = simulated_fleet
    # Every create below reaches the admin within a second of the first, however loaded the machine.
    _admin(thread).creates.shares.window = 1.0
    options = {"admin_url": thread.url, "api_key": KEY, "cpus": 0.5, "queue_timeout": 0}
    created = await asyncio.gather(
        *(AsyncSandbox.create("busybox", **options) for _ in range(8)),  # type: ignore[arg-type]
        return_exceptions=True,
    )
    running = [c for c in created if isinstance(c, AsyncSandbox)]
    try:
        # 6 slots (2 workers of 3): 6 run; of the other two, one waits for room it never gets (queue_timeout
        # 0) and the other is over the quota of 7 or finds no room either.
        assert len(running) == 6, created
        assert all(isinstance(c, CapacityExceeded | QuotaExceeded) for c in created if c not in running)
        assert len({s.id for s in running}) == 6
        for sandbox in running:
            assert (await sandbox.refresh()).state == "running"
        # One call per worker for its three, not one per create.
        assert sorted(posts) == sorted({(w, GROUP_PATH) for w, _ in posts}) and len(posts) == 2
    finally:
        for sandbox in running:
            await sandbox.close()


def test_a_group_no_worker_could_hold_is_refused_whole(simulated_fleet):
    thread, _ = simulated_fleet
    from rock.sdk.errors import BadRequest

    with pytest.raises(BadRequest, match="no worker can ever hold 8"):
        Sandbox.group(2, "busybox", admin_url=thread.url, api_key=KEY, cpus=8)


def test_opens_of_one_spec_at_the_same_time_share_one_group_create(simulated_fleet):
    """As a training step's episodes (or a task's attempts) each open their sandbox from their own thread."""
    from concurrent.futures import ThreadPoolExecutor

    from rock.sdk.grouping import GroupedOpens

    thread, _ = simulated_fleet
    opens = GroupedOpens(window=0.5)
    spec = {"image": "busybox", "admin_url": thread.url, "api_key": KEY, "cpus": 0.5}
    with ThreadPoolExecutor(5) as pool:
        same = [pool.submit(opens.open, **spec) for _ in range(4)]
        other = pool.submit(opens.open, **{**spec, "cpus": 1.0})
        sandboxes = [f.result() for f in same]
        alone = other.result()
    try:
        assert opens.groups == 2 and len({s.id for s in sandboxes}) == 4
        metrics = httpx.get(f"{thread.url}/metrics", headers={"Authorization": f"Bearer {KEY}"}).text
        assert "rock_group_creates_total 2.0" in metrics
        assert "rock_group_create_size_sum 5.0" in metrics  # 4 + 1
        # Each worker (3 CPUs) holds 1 CPU or more: 2.5 CPUs find no room; its member's error is raised.
        with pytest.raises(CapacityExceeded):
            GroupedOpens(window=0).open(**{**spec, "cpus": 2.5, "queue_timeout": 0})
    finally:
        for sandbox in [*sandboxes, alone]:
            sandbox.close()


@pytest.mark.docker
def test_a_group_on_real_docker_runs_what_fits_each_member_a_sandbox_of_its_own():
    from rock.fleet import LocalFleet
    from rock.images import ensure_base_images

    ensure_base_images()
    with LocalFleet(short_tmp("rock-grp-"), slots=2) as fleet:
        group = Sandbox.group(3, "busybox", admin_url=fleet.url, cpus=0.25, memory="64m", queue_timeout=0)
        try:
            assert group.summary.startswith("2 of 3 sandboxes running; 1 not: 1 CapacityExceeded")
            outputs = {s.exec(["sh", "-c", "echo $HOSTNAME"]).output.strip() for s in group.sandboxes}
            assert len(outputs) == 2  # two containers, not one shared
            assert fleet.containers() == {s.id for s in group.sandboxes}
        finally:
            for sandbox in group.sandboxes:
                sandbox.close()
