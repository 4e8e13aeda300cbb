"""The warm pool (issue 28): `rock admin serve --warm busybox=2` keeps two started sandboxes of the default
spec; a matching create takes one (fresh, never one a tenant had), the pool refills in the background, a
create of another spec starts cold, and an admin restarted keeps the pool without leaking a container."""

from __future__ import annotations

import time
import uuid

import httpx
import pytest

from rock.fleet import LocalFleet, short_tmp
from rock.sdk.sandbox import Sandbox

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _until(check, what: str, tries: int = 600) -> None:  # type: ignore[no-untyped-def]
    for _ in range(tries):
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"never: {what}")


def _hits(fleet: LocalFleet) -> float:
    for line in httpx.get(f"{fleet.url}/metrics", timeout=10).text.splitlines():
        if line.startswith('rock_warm_pool_takes_total{outcome="hit"}'):
            return float(line.split()[-1])
    return 0.0


def _expires(sandbox_id: str) -> float:
    import docker

    client = docker.from_env()
    try:
        labels = client.api.inspect_container(f"rock-{sandbox_id}")["Config"]["Labels"]
        return float(labels["rock.expires"])
    finally:
        client.close()


def test_a_warm_pool_hands_out_fresh_sandboxes_refills_and_survives_a_restart():
    from rock.images import ensure_base_images

    ensure_base_images()
    fleet = LocalFleet(short_tmp("rock-warm-"), f"warm-{uuid.uuid4().hex[:8]}", slots=6)
    fleet.admin.args += ["--warm", "busybox=2"]
    with fleet:
        pooled = lambda: fleet.health()["warm"].get("busybox", 0)  # noqa: E731
        _until(lambda: pooled() == 2, "the pool holds two started sandboxes")
        first_pool = fleet.containers()
        assert len(first_pool) == 2
        # Its TTL starts when a user takes it: the lifetime label covers its wait in the pool too.
        assert min(_expires(sid) for sid in first_pool) > time.time() + 1.4 * 3600

        sandbox = Sandbox("busybox", admin_url=fleet.url)  # exactly the pool's spec
        assert sandbox.id in first_pool and _hits(fleet) == 1
        assert sandbox.info.owner == "local" and sandbox.exec("echo warm").output.strip() == "warm"
        _until(lambda: pooled() == 2 and len(fleet.containers()) == 3, "the pool refilled in the background")
        sandbox.close()
        _until(lambda: sandbox.id not in fleet.containers(), "the taken sandbox removed, not pooled again")
        second_pool = fleet.containers()
        assert len(second_pool) == 2 and sandbox.id not in second_pool

        with Sandbox("busybox", admin_url=fleet.url, cpus=0.5) as cold:  # another spec: started cold
            assert cold.id not in second_pool and _hits(fleet) == 1
            assert _expires(cold.id) < time.time() + 1.1 * 3600

        fleet.admin.stop()
        fleet.admin.start()
        fleet.wait_for_workers(1)
        _until(lambda: pooled() == 2, "the restarted admin has its pool back")
        assert fleet.containers() == second_pool  # adopted: nothing started again, nothing left over
        with Sandbox("busybox", admin_url=fleet.url) as again:
            assert again.id in second_pool
