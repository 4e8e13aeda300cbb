"""Attacks on a sandbox from inside it and from the host (issue 18), each reproduced on real Docker."""

from __future__ import annotations

import os
import stat
import time
import uuid
from pathlib import Path

import httpx
import pytest

from rock.fleet import LocalFleet
from rock.sdk.errors import SandboxFailed
from rock.sdk.sandbox import Sandbox
from rock.sdk.types import FailureReason, SandboxState

pytestmark = [pytest.mark.docker, pytest.mark.slow]
SMALL = {"cpus": 0.5, "memory": "256m"}


def _assert_removed(fleet: LocalFleet, sandbox_id: str) -> None:
    """The admin removes a failed sandbox's container in the background: wait (bounded) for it to go."""
    deadline = time.monotonic() + 30
    while sandbox_id in fleet.containers() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert sandbox_id not in fleet.containers()


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
        # A new process: the bomb held every pid. The bomb's own complaints (`fork: retry`) may come through
        # the shell's output with it, and a fork that the dying bomb's signals interrupt fails once: a few
        # tries, each in a sandbox the bomb no longer starves.
        for _ in range(3):
            after = sandbox.run("sh -c 'echo alive'", timeout=30)
            if "alive\n" in after.output:
                break
        assert "alive\n" in after.output and after.exit_code == 0
        # Killed processes linger as zombies until the rocklet (their PID 1) reaps them, within a second.
        deadline = time.monotonic() + 30
        while _process_count(sandbox) >= 10 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _process_count(sandbox) < 10
        # What the dying bomb wrote after the last command's end marker is read with the next command's output
        # (in about 1 of 10 runs): one command takes it, and after that only a command's own output may come.
        sandbox.run("true", timeout=30)
        assert sandbox.run("echo again", timeout=30).output == "again\n"


def test_exec_kills_what_its_command_left_running(fleet: LocalFleet):
    tag = f"7{uuid.uuid4().int % 10**6}"
    with Sandbox("busybox", admin_url=fleet.url, **SMALL) as sandbox:
        started = sandbox.exec(["sh", "-c", f"sleep {tag} & echo started"], timeout=20)
        assert started.output == "started\n"
        left = sandbox.exec(["sh", "-c", "ps -o args"], timeout=20).output
        assert f"sleep {tag}" not in left


def test_the_socket_folder_is_nosuid_nodev_noexec_and_owner_only(fleet: LocalFleet):
    """A setuid-root file placed in the folder from a root sandbox must give no host user root."""
    with Sandbox("debian:bookworm", admin_url=fleet.url, user="root", **SMALL) as sandbox:
        mounts = sandbox.exec(["sh", "-c", "grep ' /run/rock ' /proc/mounts"], timeout=20).output.split()
        assert {"nosuid", "nodev", "noexec"} <= set(mounts[3].split(","))
        plant = "cp /bin/bash /run/rock/sh && chmod 4755 /run/rock/sh"
        planted = sandbox.exec(["sh", "-c", plant], timeout=20)
        assert planted.exit_code == 0
        host_dir = Path(sandbox.refresh().host_dir or "")
        flags = os.statvfs(host_dir).f_flag
        assert flags & os.ST_NOSUID and flags & os.ST_NODEV and flags & os.ST_NOEXEC
        assert stat.S_IMODE(host_dir.stat().st_mode) == 0o700
        assert stat.S_IMODE((host_dir / "rocklet" / "rocklet.sock").stat().st_mode) == 0o600


def test_the_rocklet_refuses_a_request_without_its_token(fleet: LocalFleet):
    """Any host user who reaches the socket could run commands in the sandbox without an admin key."""
    with Sandbox("busybox", admin_url=fleet.url, **SMALL) as sandbox:
        socket_path = Path(sandbox.refresh().host_dir or "") / "rocklet" / "rocklet.sock"
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(socket_path)), timeout=10) as client:
            refused = client.post("http://rocklet/exec", json={"cmd": "id", "timeout": 5})
            assert refused.status_code == 401 and "token" in refused.text
            forged = client.post(
                "http://rocklet/exec", json={"cmd": "id", "timeout": 5}, headers={"Authorization": "Bearer x"}
            )
            assert forged.status_code == 401
        assert sandbox.run("echo still mine").output == "still mine\n"


def test_a_sandbox_cannot_swap_its_socket_for_a_symlink(fleet: LocalFleet):
    """Replacing rocklet.sock with a symlink to the Docker socket redirected the worker to dockerd. The
    rocklet's folder is now sealed read-only (issue 26); the client still refuses a symlink
    (test_rocklet_access shows it without Docker)."""
    with Sandbox("busybox", admin_url=fleet.url, **SMALL) as sandbox:
        where = "/run/rock/rocklet/rocklet.sock"
        swap = f"rm {where} && ln -s /var/run/docker.sock {where}"
        swapped = sandbox.exec(["sh", "-c", swap], timeout=20)
        assert swapped.exit_code != 0 and "Read-only file system" in swapped.output
        assert sandbox.run("echo hi", timeout=10).output == "hi\n"
        assert sandbox.refresh().state is SandboxState.RUNNING


def test_a_sandbox_over_its_disk_limit_is_stopped(fleet: LocalFleet):
    """`dd` wrote 21 GB inside a default sandbox; writes to the socket folder landed on the host."""
    sandbox = Sandbox("python:3.11", admin_url=fleet.url, disk="200m", **SMALL)
    try:
        fill_host = "dd if=/dev/zero of=/run/rock/fill bs=1M count=200"
        into_host = sandbox.exec(["sh", "-c", fill_host], timeout=60)
        assert into_host.exit_code != 0 and "No space left" in into_host.output
        sandbox.exec(["rm", "/run/rock/fill"], timeout=20)
        # On a filesystem of its own size (rock.worker.scratch) the write stops at the limit; where the
        # worker can only measure, the sandbox is stopped.
        fill_layer = (
            "dd if=/dev/zero of=/var/tmp/fill bs=1M count=2000 2>/tmp/dd.err; cat /tmp/dd.err; "
            "du -sm /var/tmp; grep -q 'No space' /tmp/dd.err || sleep 60"
        )
        try:
            filled = sandbox.exec(["sh", "-c", fill_layer], timeout=120)
        except SandboxFailed as caught:
            assert caught.reason == FailureReason.DISK_QUOTA
            info = sandbox.refresh()
            assert (info.state, info.failure_reason) == (SandboxState.FAILED, FailureReason.DISK_QUOTA)
        else:
            assert "No space left on device" in filled.output, filled.output
            assert int(filled.output.rsplit("/var/tmp", 1)[0].split()[-1]) <= 200, filled.output
    finally:
        sandbox.close()
    _assert_removed(fleet, sandbox.id)
