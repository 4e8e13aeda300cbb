"""Attacks on a sandbox from inside it and from the host (issue 18), each reproduced on real Docker."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from rock.fleet import LocalFleet, short_tmp
from rock.sdk.sandbox import Sandbox

pytestmark = [pytest.mark.docker, pytest.mark.slow]
SMALL = {"cpus": 0.5, "memory": "256m"}


@pytest.fixture(scope="module")
def fleet() -> Iterator[LocalFleet]:
    from rock.images import ensure_base_images

    ensure_base_images()
    fleet = LocalFleet(short_tmp("rock-hard-"), f"hard-{uuid.uuid4().hex[:6]}")
    fleet.admin.start()
    try:
        fleet.wait_for_workers()
        yield fleet
    finally:
        fleet.close()


def _process_count(sandbox: Sandbox) -> int:
    listing = sandbox.exec(["sh", "-c", "ls /proc"], timeout=20).output.split()
    return sum(entry.isdigit() for entry in listing)


def test_a_running_command_counts_as_activity(fleet: LocalFleet):
    """The idle reaper used to stop a sandbox while its only command was still running."""
    with Sandbox("busybox", admin_url=fleet.url, idle_timeout=2, **SMALL) as sandbox:
        result = sandbox.run("sleep 5; echo done", timeout=30)
        assert result.output == "done\n"
        assert sandbox.refresh().state.value == "running"


def test_a_fork_bomb_does_not_outlive_its_command(fleet: LocalFleet):
    """`:(){ :|:& };:` returns at once; its processes must not starve the commands after it."""
    with Sandbox("python:3.11", admin_url=fleet.url, pids=64, **SMALL) as sandbox:
        sandbox.run(":(){ :|:& };:", timeout=10)
        after = sandbox.run("sh -c 'echo alive'", timeout=30)  # a new process: the bomb held every pid
        # The bomb's own complaints (`fork: retry`) may come through the shell's output with it.
        assert "alive\n" in after.output and after.exit_code == 0
        assert _process_count(sandbox) < 10
        assert sandbox.run("echo again", timeout=30).output == "again\n"


def test_exec_kills_what_its_command_left_running(fleet: LocalFleet):
    tag = f"7{uuid.uuid4().int % 10**6}"
    with Sandbox("busybox", admin_url=fleet.url, **SMALL) as sandbox:
        started = sandbox.exec(["sh", "-c", f"sleep {tag} & echo started"], timeout=20)
        assert started.output == "started\n"
        left = sandbox.exec(["sh", "-c", "ps -o args"], timeout=20).output
        assert f"sleep {tag}" not in left
