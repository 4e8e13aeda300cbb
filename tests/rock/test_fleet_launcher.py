"""The local-fleet launcher: a fleet started with `stop_with_parent` stops and cleans up when the process that
started it is killed without leaving its `with` block (rome-bench killed by a scheduler)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

LAUNCH = """
import json, sys, time
from rock.fleet import LocalFleet
fleet = LocalFleet(local_worker=False, stop_with_parent=True).__enter__()
print(json.dumps({"url": fleet.url, "state_dir": str(fleet.state_dir)}), flush=True)
time.sleep(600)
"""


@pytest.mark.docker
@pytest.mark.slow
def test_a_fleet_stops_and_cleans_up_when_its_launcher_is_killed():
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCH], stdout=subprocess.PIPE, text=True)
    try:
        assert launcher.stdout is not None
        started = json.loads(launcher.stdout.readline())
        assert httpx.get(f"{started['url']}/health", timeout=5).json()["status"] == "ok"
    finally:
        launcher.kill()
        launcher.wait()
    # The guard looks for its parent every 2 s and gives the admin 30 s to stop on SIGTERM before the sweep;
    # under load a graceful stop can take most of that, so the bound covers the guard's own worst case.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and Path(started["state_dir"]).exists():
        time.sleep(0.2)
    assert not Path(started["state_dir"]).exists()
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{started['url']}/health", timeout=1)
        except httpx.HTTPError:
            return
        time.sleep(0.2)
    pytest.fail(f"the admin at {started['url']} still answers after its launcher died")
