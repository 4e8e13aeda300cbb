"""PrivateFleet (rock.sdk): a fleet in processes of its own, up for its client and gone with everything it
made when the client closes it or is killed -9."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import httpx
import pytest

from rock.fleet import labelled_containers
from rock.sdk.private_fleet import PrivateFleet
from rock.sdk.sandbox import Sandbox

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CLIENT = """
import json, time
import httpx
from rock.sdk.private_fleet import PrivateFleet
from rock.sdk.sandbox import Sandbox

fleet = PrivateFleet(slots=1, packages="offline").__enter__()
sandbox = Sandbox("busybox", admin_url=fleet.url, cpus=0.25, memory="64m", ttl=3600)
workers = [w["id"] for w in httpx.get(f"{fleet.url}/v1/workers").json()]
print(json.dumps({"url": fleet.url, "sandbox": sandbox.id, "workers": workers}), flush=True)
time.sleep(3600)
"""


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=2).is_success
    except httpx.HTTPError:
        return False


def _until(check, what: str, seconds: float = 120.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    raise AssertionError(f"never: {what}")


def test_a_private_fleet_serves_sandboxes_and_is_gone_after_close() -> None:
    with PrivateFleet(slots=2, packages="offline") as fleet:
        assert httpx.get(f"{fleet.url}/health", timeout=5).json()["workers"] == 1
        workers = [w["id"] for w in httpx.get(f"{fleet.url}/v1/workers", timeout=5).json()]
        with Sandbox("busybox", admin_url=fleet.url, cpus=0.25, memory="64m", ttl=600) as sandbox:
            assert sandbox.exec(["echo", "hi"]).output.strip() == "hi"
            kept = Sandbox("busybox", admin_url=fleet.url, cpus=0.25, memory="64m", ttl=600)
            assert kept.id in set().union(*(labelled_containers(w) for w in workers))
    assert not _answers(fleet.url)
    assert all(labelled_containers(w) == set() for w in workers)


def test_a_private_fleet_goes_with_its_client_killed_minus_nine() -> None:
    client = subprocess.Popen([sys.executable, "-c", CLIENT], stdout=subprocess.PIPE, text=True)
    try:
        assert client.stdout is not None
        line = client.stdout.readline()
        assert line, "the client exited before its fleet was up"
        up = json.loads(line)
        assert _answers(up["url"])
        assert up["sandbox"] in set().union(*(labelled_containers(w) for w in up["workers"]))
    finally:
        client.kill()
        client.wait()
    _until(lambda: not _answers(up["url"]), "the fleet stopped after its client was killed")
    _until(
        lambda: all(labelled_containers(w) == set() for w in up["workers"]),
        "the fleet's containers were removed",
    )


def test_an_unknown_package_mode_is_refused_before_anything_starts() -> None:
    with pytest.raises(ValueError, match="packages='sideways' is not one of online, offline"):
        PrivateFleet(packages="sideways")  # type: ignore[arg-type]
