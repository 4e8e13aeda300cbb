"""Faults a fleet must survive (issue 18): kill -9 of the admin or of a worker in the middle of a command,
and a dockerd restart. Nothing is lost, no command's output reaches another call, no container is left.

The dockerd tests restart a dockerd of their own (its own data root, sockets and containerd namespace), so
other users of the host's Docker are never touched.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from rock.fleet import LocalFleet, short_tmp
from rock.sdk.errors import AdminUnavailable, RockError, SandboxFailed, WorkerUnavailable
from rock.sdk.sandbox import Sandbox
from rock.sdk.types import FailureReason, SandboxState
from rock.worker.socket_dir import release_mounts_under

pytestmark = [pytest.mark.docker, pytest.mark.slow]
SMALL = {"cpus": 0.5, "memory": "128m"}
ORPHAN = "touch /tmp/started; sleep 4; echo ORPHANED-OUTPUT"


def _split_fleet() -> LocalFleet:
    """An admin and a worker in processes of their own, so either can be killed alone."""
    fleet = LocalFleet(short_tmp("rock-fault-"), f"fault-{uuid.uuid4().hex[:6]}", local_worker=False)
    fleet.admin.start()
    fleet.worker.start()
    try:
        fleet.wait_for_workers()
    except BaseException:
        fleet.close()
        raise
    return fleet


@pytest.fixture
def fleet() -> Iterator[LocalFleet]:
    from rock.images import ensure_base_images

    ensure_base_images()
    fleet = _split_fleet()
    try:
        yield fleet
    finally:
        fleet.close()


def _until(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except RockError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{what} did not happen within {timeout:g} s")


def _start_orphan(sandbox: Sandbox) -> tuple[threading.Thread, dict[str, object]]:
    """Run ORPHAN in the default session on a thread; return once it runs inside the sandbox."""
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["result"] = sandbox.run(ORPHAN, timeout=60)
        except Exception as exc:  # what the fault does to the caller is what the test checks
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    _until(
        lambda: sandbox.exec(["test", "-e", "/tmp/started"], timeout=20).exit_code == 0, "the command's start"
    )
    return thread, outcome


def _assert_no_container(fleet: LocalFleet, sandbox_id: str) -> None:
    _until(lambda: sandbox_id not in fleet.containers(), f"the removal of {sandbox_id}'s container", 30)


def test_kill_9_of_the_admin_during_a_command(fleet: LocalFleet):
    sandbox = Sandbox("busybox", admin_url=fleet.url, **SMALL)
    sandbox.run("export KEPT=yes; cd /tmp")
    thread, outcome = _start_orphan(sandbox)
    fleet.admin.stop(signal.SIGKILL)
    thread.join(timeout=60)
    assert isinstance(outcome.get("error"), AdminUnavailable), outcome
    assert "retry" in str(outcome["error"])
    fleet.admin.start()
    fleet.wait_for_workers()
    assert sandbox.refresh().state is SandboxState.RUNNING
    after = sandbox.run("echo $KEPT $(pwd)", timeout=60)
    assert after.output == "yes /tmp\n"
    sandbox.close()
    _assert_no_container(fleet, sandbox.id)


def test_kill_9_of_a_worker_during_a_command(fleet: LocalFleet):
    sandbox = Sandbox("busybox", admin_url=fleet.url, **SMALL)
    sandbox.run("export KEPT=yes")
    thread, outcome = _start_orphan(sandbox)
    fleet.worker.stop(signal.SIGKILL)
    thread.join(timeout=60)
    assert isinstance(outcome.get("error"), WorkerUnavailable), outcome
    fleet.worker.start()
    outputs: list[str] = []
    _until(lambda: outputs.append(sandbox.run("echo $KEPT", timeout=60).output) is None, "adoption")
    assert outputs == ["yes\n"]
    assert sandbox.refresh().state is SandboxState.RUNNING
    sandbox.close()
    _assert_no_container(fleet, sandbox.id)


class PrivateDockerd:
    """A dockerd of the test's own: its data root, exec root, socket, containerd namespace and bridge.

    Never `--bridge=none`: with it dockerd deletes the host's `docker0`, which the host's own dockerd and
    everyone's bridge containers use. Its bridge is one this test makes, and iptables are left alone.
    """

    def __init__(self, root: Path, live_restore: bool) -> None:
        self.root = root
        self.socket = root / "docker.sock"
        self.url = f"unix://{self.socket}"
        tag = uuid.uuid4().hex[:8]
        self.bridge = f"rockf{tag[:8]}"
        self.bridge_address = f"10.254.{int(tag[:2], 16)}.1/24"
        self.args = [
            "dockerd",
            f"--data-root={root / 'data'}",
            f"--exec-root={root / 'exec'}",
            f"--pidfile={root / 'dockerd.pid'}",
            f"--host={self.url}",
            f"--bridge={self.bridge}",
            "--iptables=false",
            "--ip-masq=false",
            f"--containerd-namespace=rock-fault-{tag}",
            f"--containerd-plugins-namespace=rock-fault-plugins-{tag}",
            *(["--live-restore"] if live_restore else []),
        ]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        if not Path(f"/sys/class/net/{self.bridge}").exists():
            for command in (
                ["ip", "link", "add", "name", self.bridge, "type", "bridge"],
                ["ip", "addr", "add", self.bridge_address, "dev", self.bridge],
                ["ip", "link", "set", self.bridge, "up"],
            ):
                subprocess.run(command, check=True, capture_output=True, timeout=30)
        with (self.root / "dockerd.log").open("ab") as log:
            self.proc = subprocess.Popen(
                self.args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        _until(self._answers, "the private dockerd's start", 60)

    def _answers(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(f"dockerd exited: {(self.root / 'dockerd.log').read_text()[-2000:]}")
        try:
            client = docker.DockerClient(base_url=self.url, timeout=5)
        except docker.errors.DockerException:  # its socket is not there yet
            return False
        try:
            return bool(client.ping())
        except docker.errors.DockerException:
            return False
        finally:
            client.close()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=60)

    def remove_bridge(self) -> None:
        subprocess.run(["ip", "link", "delete", self.bridge], capture_output=True, timeout=30)

    def load(self, image: str) -> None:
        saved = subprocess.run(["docker", "save", image], check=True, capture_output=True, timeout=120).stdout
        subprocess.run(
            ["docker", "-H", self.url, "load"], input=saved, check=True, capture_output=True, timeout=120
        )


@pytest.fixture(params=[True, False], ids=["live-restore", "plain"])
def dockerd_fleet(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple]:
    if os.geteuid() != 0 or shutil.which("dockerd") is None:
        pytest.skip("a private dockerd needs root and the dockerd binary")
    from rock.images import ensure_base_images

    ensure_base_images()
    host_bridge = _link("docker0")
    daemon = PrivateDockerd(short_tmp("rock-dockerd-"), live_restore=request.param)
    try:
        daemon.start()
        daemon.load("ale/busybox:latest")
        monkeypatch.setenv("DOCKER_HOST", daemon.url)  # the worker (and fleet.containers) use this dockerd
        fleet = _split_fleet()
        try:
            yield fleet, daemon
        finally:
            fleet.close()
    finally:
        daemon.stop()
        daemon.remove_bridge()
        release_mounts_under(daemon.root)  # dockerd leaves its data root mounted on itself
        shutil.rmtree(daemon.root, ignore_errors=True)
    assert _link("docker0") == host_bridge, "the private dockerd touched the host's docker0"


def _link(name: str) -> str | None:
    """The interface index of `name`, or None: what tells a deleted and re-made interface apart."""
    index = Path(f"/sys/class/net/{name}/ifindex")
    return index.read_text().strip() if index.exists() else None


def test_a_dockerd_restart(dockerd_fleet: tuple):
    fleet, daemon = dockerd_fleet
    live_restore = "--live-restore" in daemon.args
    sandbox = Sandbox("busybox", admin_url=fleet.url, **SMALL)
    sandbox.run("export KEPT=yes")
    daemon.stop()
    daemon.start()
    if live_restore:
        # The containers outlive dockerd: the sandbox keeps its shell and its state.
        assert sandbox.run("echo $KEPT", timeout=30).output == "yes\n"
        assert sandbox.refresh().state is SandboxState.RUNNING
    else:
        # dockerd stopped the container: the admin says so (not "running"), and the container goes.
        _until(lambda: sandbox.refresh().state is SandboxState.FAILED, "the sandbox's failure")
        assert sandbox.info.failure_reason == FailureReason.EXITED
        with pytest.raises(SandboxFailed):
            sandbox.run("echo hi", timeout=10)
    sandbox.close()
    _assert_no_container(fleet, sandbox.id)
    with Sandbox("busybox", admin_url=fleet.url, **SMALL) as fresh:
        assert fresh.run("echo fresh").output == "fresh\n"
    _assert_no_container(fleet, fresh.id)
