"""Ways past a sandbox's disk limit on a host where Docker cannot enforce it (issue 26 item 8): one big
fallocate, files deleted but kept open, and the container's own log."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import docker
import pytest

from rock.fleet import LocalFleet
from rock.sdk.errors import SandboxFailed
from rock.sdk.sandbox import Sandbox
from rock.sdk.types import FailureReason, SandboxState
from rock.worker.containers import container_name
from rock.worker.disk import deleted_open_bytes, log_bytes
from rock.worker.scratch import LoopScratch

SMALL = {"cpus": 0.5, "memory": "256m"}
HOLD_DELETED = """
import os, time
held = []
for i in range(4):
    path = f"/var/tmp/hidden-{i}"
    with open(path, "wb") as out:
        out.write(os.urandom(30 * 2**20))
    held.append(open(path, "rb"))
    os.unlink(path)
print("holding", flush=True)
time.sleep(60)
"""


HOLD_ONE = """
import os, sys, time
out = open(sys.argv[1], "wb")
out.write(os.urandom(8 * 2**20)); out.flush(); os.fsync(out.fileno())
os.unlink(sys.argv[1])
print("holding", flush=True)
time.sleep(60)
"""


@pytest.mark.docker
def test_one_fallocate_cannot_go_past_the_disk_limit(fleet: LocalFleet):
    """`fallocate -l 3G` took 0.04 s in a disk=100m sandbox: the whole host's disk before the next check."""
    with Sandbox("python:3.11", admin_url=fleet.url, disk="64m", **SMALL) as sandbox:
        answer = sandbox.exec(["sh", "-c", "fallocate -l 3G /var/tmp/big; echo rc=$?; du -sk /var/tmp"])
        assert "rc=0" not in answer.output, answer.output
        assert "File size limit exceeded" in answer.output, answer.output  # SIGXFSZ: RLIMIT_FSIZE
        assert int(answer.output.split()[-2]) < 64 * 1024


@pytest.mark.docker
def test_files_deleted_but_held_open_count_against_the_limit(fleet: LocalFleet):
    """120 MiB in files the sandbox deleted but keeps open, in a disk=64m sandbox: no folder shows them.
    With a filesystem of its own the writes stop at the limit; measured, the sandbox is stopped."""
    sandbox = Sandbox("python:3.11", admin_url=fleet.url, disk="64m", **SMALL)
    try:
        sandbox.write_file("/tmp/hold.py", HOLD_DELETED)
        try:
            answer = sandbox.exec(["python3", "/tmp/hold.py"], timeout=90)
        except SandboxFailed as failed:
            assert failed.reason == FailureReason.DISK_QUOTA
            assert "keeps open" in failed.message
            info = sandbox.refresh()
            assert (info.state, info.failure_reason) == (SandboxState.FAILED, FailureReason.DISK_QUOTA)
        else:
            assert "No space left on device" in answer.output, answer.output
            assert "holding" not in answer.output
    finally:
        sandbox.close()


@pytest.mark.docker
def test_many_fallocates_stop_at_the_limit_on_a_filesystem_of_the_sandboxes_size(fleet: LocalFleet):
    """Each under RLIMIT_FSIZE, together 600 MiB in well under the disk watch's interval: only a filesystem
    of the sandbox's own size stops them (this host has loop devices, so the worker makes one)."""
    with Sandbox("python:3.11", admin_url=fleet.url, disk="64m", **SMALL) as sandbox:
        fill = "for i in $(seq 20); do fallocate -l 30M /var/tmp/f$i || break; done; du -sk /var/tmp; df -k /"
        answer = sandbox.exec(["sh", "-c", fill], timeout=60)
        assert "No space left on device" in answer.output, answer.output
        held_kib = int(answer.output.rsplit("/var/tmp", 1)[0].split()[-1])
        assert held_kib <= 64 * 1024, answer.output
        assert sandbox.exec(["true"]).exit_code == 0  # refused, not stopped


@pytest.mark.docker
def test_the_container_log_is_capped(fleet: LocalFleet):
    """Writing to /proc/1/fd/1 grew the container's json log to 302 MB, counted nowhere. That path is shut
    now (the rocklet, PID 1, is not dumpable: its fds are out of reach even for root), and the log is capped
    whatever else reaches it."""
    client = docker.from_env()
    with Sandbox("python:3.11", admin_url=fleet.url, user="root", **SMALL) as sandbox:
        flood = sandbox.exec(["sh", "-c", "echo x > /proc/1/fd/1 && echo wrote"], timeout=30)
        assert "wrote" not in flood.output
        found = client.api.inspect_container(container_name(sandbox.id))
    config = found["HostConfig"]["LogConfig"]
    assert config == {"Type": "json-file", "Config": {"max-size": "10m", "max-file": "2"}}


def test_deleted_but_open_files_and_logs_are_measured(tmp_path: Path):
    held = tmp_path / "held"
    holder = subprocess.Popen([sys.executable, "-c", HOLD_ONE, str(held)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        assert not held.exists()
        assert deleted_open_bytes([holder.pid, holder.pid]) >= 8 * 2**20
    finally:
        holder.kill()
        holder.wait()
    log = tmp_path / "c-json.log"
    log.write_bytes(b"x" * 4096)
    (tmp_path / "c-json.log.1").write_bytes(b"y" * 8192)
    assert log_bytes(log) >= 12288


@pytest.mark.docker
def test_a_fleet_sweeping_a_stopped_workers_sandboxes_leaves_no_filesystem_mounted():
    """A stopped worker leaves its containers for adoption; whoever removes them for good (the fleet here,
    with a plain `docker rm -f`) leaves no sandbox filesystem mounted (Docker detaches a mounted layer folder
    itself when it removes it) and no container behind."""
    client = docker.from_env()
    with LocalFleet() as fleet:
        sandbox = Sandbox("python:3.11", admin_url=fleet.url, disk="64m", **SMALL)
        found = client.api.inspect_container(container_name(sandbox.id))
        layer = Path(found["GraphDriver"]["Data"]["UpperDir"]).parent
        assert os.path.ismount(layer)
    assert not os.path.ismount(layer)
    with pytest.raises(docker.errors.NotFound):
        client.api.inspect_container(found["Id"])


def test_a_sandbox_filesystem_holds_its_layer_and_stops_at_its_size(tmp_path: Path):
    scratch = LoopScratch(tmp_path / "disks")
    if scratch.usable() is not None:
        pytest.skip(f"no per-sandbox filesystems on this host: {scratch.usable()}")
    layer = tmp_path / "layer"
    (layer / "diff").mkdir(parents=True)
    (layer / "work" / "work").mkdir(parents=True)
    (layer / "link").write_text("ABC")
    scratch.attach("s1", layer, 32 * 2**20)
    try:
        assert os.path.ismount(layer) and (layer / "link").read_text() == "ABC"
        with open(layer / "diff" / "big", "wb") as out, pytest.raises(OSError, match="No space left"):
            os.posix_fallocate(out.fileno(), 0, 3 * 2**30)
        (layer / "diff" / "big").unlink()  # ext4 keeps what a failed fallocate got
        written = 0
        with open(layer / "diff" / "fill", "wb") as out, pytest.raises(OSError, match="No space left"):
            while True:
                out.write(b"\0" * 2**20)
                out.flush()
                written += 2**20
        assert 30 * 2**20 <= written <= 32 * 2**20
        assert scratch.sandboxes() == ["s1"]
    finally:
        scratch.detach("s1")
    assert not os.path.ismount(layer)
    assert scratch.sandboxes() == []
    assert (layer / "link").read_text() == "ABC"  # the folder Docker made is as it was
