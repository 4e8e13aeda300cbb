"""The admin's fleet page (/ui): the page holds no data, its data routes take the API's keys and show a
caller only what the API would, each sandbox's recent commands are kept; and the page in a real browser."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from rock.admin.config import KeyPolicy
from rock.fleet import short_tmp
from tests.view.browser import chromium, console_errors, keep_screenshot
from tests.view.test_roll_view_browser import wait_for

KEY, OTHER = "k" * 24, "o" * 24
AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture
def keyed_admin(admin_factory):  # type: ignore[no-untyped-def]
    """A keyed admin with one simulated worker of one slot (rock.worker.simulated: the admin-worker contract
    over HTTP, sandboxes in memory), its slot taken by a sandbox of alice's, and a second create of hers
    waiting in the admission queue."""
    admin = admin_factory(api_keys=[KeyPolicy(name="alice", key=KEY), KeyPolicy(name="bob", key=OTHER)])
    folder = short_tmp("rock-ui-")
    latencies = folder / "latencies.json"
    latencies.write_text(json.dumps({"start": [0.01], "remove": [0.0]}))
    command = [sys.executable, "-m", "rock.worker.simulated", "--admin", admin.url, "--count", "1"]
    command += ["--prefix", f"ui{os.getpid()}", "--latencies", str(latencies), "--slots", "1"]
    command += ["--stats", str(folder / "stats.json"), "--heartbeat-interval", "0.5"]
    token = admin.server.config.app.state.admin.auth.worker_token
    with (folder / "sim.log").open("ab") as log:
        worker = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "ROCK_WORKER_TOKEN": token}
        )
    waiting = threading.Thread(target=create, args=(admin.url, 20), daemon=True)
    created: httpx.Response | None = None
    try:
        wait_for(lambda: httpx.get(f"{admin.url}/health", timeout=5).json()["workers"] == 1)
        created = create(admin.url, 10)
        assert created.status_code == 201, created.text
        waiting.start()
        wait_for(lambda: fleet(admin.url, KEY)["queue_length"] == 1)
        yield admin, created.json()["id"]
    finally:
        # Freeing the slot admits the queued create at once; otherwise its thread holds the teardown for the
        # rest of its 20 s queue_timeout.
        if created is not None and created.status_code == 201:
            httpx.delete(f"{admin.url}/v1/sandboxes/{created.json()['id']}", headers=AUTH, timeout=10)
        if waiting.ident is not None:  # started
            waiting.join(timeout=30)
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)


def create(url: str, queue_timeout: float) -> httpx.Response:
    return httpx.post(
        f"{url}/v1/sandboxes",
        json={"image": "python:3.11-slim", "queue_timeout": queue_timeout},
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=queue_timeout + 10,
    )


def fleet(url: str, key: str) -> dict:
    response = httpx.get(f"{url}/ui/api/fleet", headers={"Authorization": f"Bearer {key}"}, timeout=10)
    assert response.status_code == 200, response.text
    return response.json()


def test_data_needs_the_api_key_and_shows_only_the_callers_own(keyed_admin) -> None:  # type: ignore[no-untyped-def]
    admin, sandbox = keyed_admin
    url = admin.url
    page = httpx.get(f"{url}/ui", timeout=10)
    assert page.status_code == 200 and "ROCK fleet" in page.text
    assert httpx.get(f"{url}/ui/api/auth", timeout=10).json() == {"key_required": True}
    assert httpx.get(f"{url}/ui/api/fleet", timeout=10).status_code == 401
    wrong = httpx.get(f"{url}/ui/api/fleet", headers={"Authorization": "Bearer " + "x" * 24}, timeout=10)
    assert wrong.status_code == 401

    mine = fleet(url, KEY)
    assert mine["caller"] == "alice"
    (worker,) = mine["workers"]
    assert worker["used_slots"] == 1 and worker["slots"] == 1 and worker["reachable"]
    (queued,) = mine["queue"]
    assert queued["owner"] == "alice" and queued["position"] == 1
    (running,) = [s for s in mine["sandboxes"] if s["id"] == sandbox]
    assert running["state"] == "running" and running["image"] == "python:3.11-slim" and running["age_s"] >= 0
    assert sandbox not in page.text and queued["sandbox"] not in page.text  # the page itself carries no data
    theirs = fleet(url, OTHER)
    assert theirs["queue_length"] == 1 and theirs["queue"] == [] and theirs["sandboxes"] == []

    run = httpx.post(f"{url}/v1/sandboxes/{sandbox}/run", json={"cmd": "echo hi"},
                     headers={"Authorization": f"Bearer {KEY}"}, timeout=10)  # fmt: skip
    assert run.status_code >= 400  # a simulated worker runs nothing: refused, and still recorded
    # bob cannot see alice's sandbox: his attempt is refused and leaves nothing in its log
    refused = httpx.post(f"{url}/v1/sandboxes/{sandbox}/run", json={"cmd": "rm -rf /"},
                         headers={"Authorization": f"Bearer {OTHER}"}, timeout=10)  # fmt: skip
    assert refused.status_code == 404
    commands = f"{url}/ui/api/sandboxes/{sandbox}/commands"
    (entry,) = httpx.get(commands, headers={"Authorization": f"Bearer {KEY}"}, timeout=10).json()
    assert entry["command"] == "echo hi" and entry["op"] == "run" and entry["status"] == run.status_code
    assert httpx.get(commands, headers={"Authorization": f"Bearer {OTHER}"}, timeout=10).status_code == 404
    assert httpx.get(commands, timeout=10).status_code == 401


@pytest.mark.slow
def test_fleet_page_in_a_browser(keyed_admin, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By

    admin, sandbox = keyed_admin
    httpx.post(f"{admin.url}/v1/sandboxes/{sandbox}/run", json={"cmd": "ls /app"},
               headers={"Authorization": f"Bearer {KEY}"}, timeout=10)  # fmt: skip
    with chromium() as driver:
        driver.get(f"{admin.url}/ui")
        status = driver.find_element(By.ID, "status")
        wait_for(lambda: "needs an API key" in status.text)
        key = driver.find_element(By.ID, "key")
        key.send_keys(KEY)
        driver.find_element(By.TAG_NAME, "h1").click()  # leaving the field fires its change event
        wait_for(lambda: "as alice" in status.text)
        assert "1 waiting" in driver.find_element(By.ID, "queue-title").text
        rows = wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, "#sandboxes tbody tr"))
        assert any(sandbox in row.text for row in rows)
        next(row for row in rows if sandbox in row.text).click()
        wait_for(lambda: "ls /app" in driver.find_element(By.ID, "commands").text)
        time.sleep(0.2)
        keep_screenshot(driver, tmp_path, "rock-fleet-page.png")
        assert console_errors(driver) == []
