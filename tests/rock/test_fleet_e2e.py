"""End to end on real Docker: a fleet started from the CLI, sandboxes used through the SDK."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid

import docker
import httpx
import pytest

from rock.fleet import LocalFleet, short_tmp
from rock.sdk.errors import CapacityExceeded, CommandTimeout, SandboxFailed, Unauthorized
from rock.sdk.sandbox import AsyncSandbox, Sandbox
from rock.sdk.types import FailureReason, SandboxState

pytestmark = pytest.mark.docker
SMALL = {"cpus": 0.25, "memory": "128m"}
FORK_BOMB = """
import subprocess
procs = []
try:
    for _ in range(500):
        procs.append(subprocess.Popen(["sleep", "30"]))
    print("no limit")
except OSError as e:
    print("stopped at", len(procs), e.errno)
for p in procs:
    p.kill()
"""


@pytest.mark.slow
async def test_ten_sandboxes_created_concurrently(fleet: LocalFleet):
    async def square(i: int) -> tuple[str, str]:
        async with AsyncSandbox("python:3.11", admin_url=fleet.url, **SMALL) as sandbox:
            observation = await sandbox.run(f"echo $(( {i} * {i} ))")
            return sandbox.id, observation.output.strip()

    results = await asyncio.gather(*(square(i) for i in range(10)))
    assert [out for _, out in results] == [str(i * i) for i in range(10)]
    assert len({sandbox_id for sandbox_id, _ in results}) == 10
    assert not fleet.containers() & {sandbox_id for sandbox_id, _ in results}


def test_sessions_keep_cwd_and_env_and_a_timeout_leaves_them_usable(fleet: LocalFleet):
    with Sandbox("python:3.11", admin_url=fleet.url, **SMALL) as sandbox:
        sandbox.run("mkdir -p /tmp/work && cd /tmp/work && export COLOUR=teal")
        assert sandbox.run("echo $(pwd) $COLOUR").output.strip() == "/tmp/work teal"
        other = sandbox.run("echo [$COLOUR] $(pwd)", session="other").output.strip()
        assert other != "[teal] /tmp/work"
        with pytest.raises(CommandTimeout) as caught:
            sandbox.run("echo started; sleep 60", timeout=1)
        assert caught.value.observation is not None and "started" in caught.value.observation.output
        after = sandbox.run("echo $(pwd) $COLOUR; false")
        assert after.output.strip() == "/tmp/work teal" and after.exit_code == 1
        sandbox.create_session("named", env={"SHADE": "dark"}, cwd="/tmp")
        assert sandbox.run("echo $SHADE $(pwd)", session="named").output.strip() == "dark /tmp"
        sandbox.close_session("named")
        assert sandbox.run("echo [$SHADE]", session="named").output.strip() == "[]"  # a fresh one


def test_files_exec_upload_and_download(fleet: LocalFleet, tmp_path):
    with Sandbox("python:3.11", admin_url=fleet.url, **SMALL) as sandbox:
        sandbox.write_file("/tmp/hello.txt", "hi there\n")
        assert sandbox.read_file("/tmp/hello.txt") == b"hi there\n"
        argv = sandbox.exec(["python3", "-c", "import sys; print(sys.argv[1:])", "a b", "c"])
        assert argv.output.strip() == "['a b', 'c']" and argv.exit_code == 0
        assert sandbox.exec("pwd", cwd="/tmp").output.strip() == "/tmp"
        project = tmp_path / "project"
        (project / "src").mkdir(parents=True)
        (project / "src" / "main.py").write_text("print('uploaded')\n")
        sandbox.upload(project, "/tmp")
        assert sandbox.run("python3 /tmp/project/src/main.py").output.strip() == "uploaded"
        sandbox.run("mkdir -p /tmp/out && echo result > /tmp/out/r.txt")
        local = sandbox.download("/tmp/out", tmp_path / "back")
        assert (local / "r.txt").read_text() == "result\n"


def test_a_default_sandbox_has_no_network(fleet: LocalFleet):
    probe = (
        "import socket\n"
        "for host in ('192.0.2.1', '1.1.1.1'):\n"
        "    s = socket.socket(); s.settimeout(3)\n"
        "    try:\n"
        "        s.connect((host, 80)); print(host, 'connected')\n"
        "    except OSError as e:\n"
        "        print(host, type(e).__name__, e.errno)\n"
    )
    with Sandbox("python:3.11", admin_url=fleet.url, **SMALL) as sandbox:
        sandbox.write_file("/tmp/probe.py", probe)
        out = sandbox.exec(["python3", "/tmp/probe.py"], timeout=20).output.split("\n")
        assert "192.0.2.1 OSError 101" in out and "1.1.1.1 OSError 101" in out  # ENETUNREACH
        interfaces = sandbox.exec("tail -n +3 /proc/net/dev | cut -d: -f1").output.split()
        assert interfaces == ["lo"]
        # Its own network namespace, loopback up and `localhost` known, without Docker's network stack.
        assert sandbox.exec("readlink /proc/self/ns/net").output.strip() != os.readlink("/proc/self/ns/net")
        loopback = (
            "import socket\n"
            "server = socket.create_server(('127.0.0.1', 0))\n"
            "client = socket.create_connection(('localhost', server.getsockname()[1]), timeout=3)\n"
            "print('loopback', client.getpeername()[0], socket.gethostname())\n"
        )
        sandbox.write_file("/tmp/loopback.py", loopback)
        assert sandbox.exec(["python3", "/tmp/loopback.py"], timeout=20).output.split() == [
            "loopback",
            "127.0.0.1",
            sandbox.exec("cat /etc/hostname").output.strip(),
        ]
        assert "Permission denied" in sandbox.exec("echo '10.0.0.1 elsewhere' >> /etc/hosts").output
        config = docker.from_env().api.inspect_container(f"rock-{sandbox.id}")["Config"]
        assert config["NetworkDisabled"] is True and config["Hostname"]
        assert sandbox.exec("id -u").output.strip() == "1000"
        assert "Read-only file system" in sandbox.exec("echo x > /opt/rock/x").output
        host = docker.from_env().api.inspect_container(f"rock-{sandbox.id}")["HostConfig"]
        assert (host["NetworkMode"], host["CapDrop"], host["SecurityOpt"]) == (
            "none",
            ["ALL"],
            ["no-new-privileges"],
        )
        assert (host["CpuQuota"], host["CpuPeriod"], host["Memory"], host["PidsLimit"]) == (
            25_000,
            100_000,
            128 * 1024**2,
            256,
        )


def test_a_limit_of_a_cpu_or_more_is_set_at_create(fleet: LocalFleet):
    """Only a limit below one CPU waits for the rocklet (it would slow the interpreter's start)."""
    with Sandbox("python:3.11", admin_url=fleet.url, cpus=1.5, memory="128m") as sandbox:
        assert sandbox.run("echo up").output.strip() == "up"
        host = docker.from_env().api.inspect_container(f"rock-{sandbox.id}")["HostConfig"]
        assert (host["CpuQuota"], host["CpuPeriod"]) == (150_000, 100_000)


def test_a_root_sandbox_writes_root_owned_places_and_chowns(fleet: LocalFleet):
    with Sandbox("python:3.11", admin_url=fleet.url, user="root", **SMALL) as sandbox:
        assert sandbox.info.spec.user == "0:0"
        assert sandbox.run("id -u; echo $HOME; pwd").output.split() == ["0", "/root", "/root"]
        done = sandbox.run(
            "echo secret > /root/note && mkdir -p /srv/data && touch /srv/data/f "
            "&& chown 1000:1000 /srv/data/f && stat -c %u:%g /srv/data/f && cat /root/note "
            "&& echo ok > /etc/rock-test && echo '127.0.0.1 service.test' >> /etc/hosts "
            "&& getent hosts service.test"
        )
        assert (done.exit_code, done.output.split()) == (
            0,
            ["1000:1000", "secret", "127.0.0.1", "service.test"],
        )
        # A root shell still cannot add routes, mount, or reach the network.
        assert sandbox.run("mount -t tmpfs none /mnt").exit_code != 0
        assert sandbox.run("cat /proc/net/dev | tail -n +3 | cut -d: -f1").output.split() == ["lo"]
        host = docker.from_env().api.inspect_container(f"rock-{sandbox.id}")["HostConfig"]
        assert host["CapDrop"] == ["ALL"] and "SYS_ADMIN" not in host["CapAdd"] and "CHOWN" in host["CapAdd"]
        assert (host["NetworkMode"], host["SecurityOpt"]) == ("none", ["no-new-privileges"])


def test_a_default_sandbox_is_uid_1000_and_cannot_write_root_owned_places(fleet: LocalFleet):
    with Sandbox("python:3.11", admin_url=fleet.url, **SMALL) as sandbox:
        assert sandbox.run("id -u").output.strip() == "1000"
        assert sandbox.run("echo x > /root/note").exit_code != 0
        assert sandbox.run("touch /tmp/f && chown 0:0 /tmp/f").exit_code != 0
        assert not docker.from_env().api.inspect_container(f"rock-{sandbox.id}")["HostConfig"]["CapAdd"]


def test_a_root_busybox_sandbox_runs_its_rocklet(fleet: LocalFleet):
    with Sandbox("busybox", admin_url=fleet.url, user="root", **SMALL) as sandbox:
        assert sandbox.run("id -u && touch /root/x && echo ok").output.split() == ["0", "ok"]


def test_the_busybox_image_works_without_python_or_libc(fleet: LocalFleet):
    with Sandbox("busybox", admin_url=fleet.url, **SMALL) as sandbox:
        sandbox.run("cd /tmp && export N=7")
        assert sandbox.run("echo $N $(pwd)").output.strip() == "7 /tmp"
        assert sandbox.exec("command -v python3 || echo none").output.strip() == "none"
        assert (
            sandbox.exec("ls /lib /usr/lib 2>/dev/null | grep -c 'libc\\.so' || true").output.strip() == "0"
        )


def test_unknown_image_fails_with_a_clear_error(fleet: LocalFleet):
    with pytest.raises(SandboxFailed, match="rock image build") as caught:
        Sandbox("no-such-image:1.0", admin_url=fleet.url, **SMALL)
    assert caught.value.reason == FailureReason.IMAGE_ERROR


def test_an_oom_sandbox_is_reported_as_such(fleet: LocalFleet):
    sandbox = Sandbox("python:3.11", admin_url=fleet.url, cpus=0.5, memory="64m")
    try:
        with pytest.raises(SandboxFailed, match="OOM-killed") as caught:
            sandbox.run("python3 -c 'b = bytearray(400 * 1024 * 1024); print(len(b))'", timeout=60)
        assert caught.value.reason == FailureReason.OOM_KILLED
        info = sandbox.refresh()
        assert (info.state, info.failure_reason) == (SandboxState.FAILED, FailureReason.OOM_KILLED)
    finally:
        sandbox.close()


@pytest.mark.slow
def test_flooding_output_and_fork_bombs_are_contained(fleet: LocalFleet):
    with Sandbox("python:3.11", admin_url=fleet.url, cpus=0.5, memory="256m", pids=64) as sandbox:
        flood = sandbox.run("head -c 300000000 /dev/zero | tr '\\0' x", timeout=60)
        assert flood.truncated and len(flood.output) < 10_000_000
        sandbox.write_file("/tmp/bomb.py", FORK_BOMB)
        bomb = sandbox.exec(["python3", "/tmp/bomb.py"], timeout=60).output.split()
        assert bomb[:2] == ["stopped", "at"] and int(bomb[2]) < 64 and bomb[3] == "11"  # EAGAIN
        assert sandbox.run("echo still fine").output.strip() == "still fine"
    assert httpx.get(f"{fleet.url}/health").json()["workers"] == 1


def test_ttl_stops_a_sandbox(fleet: LocalFleet):
    sandbox = Sandbox("busybox", admin_url=fleet.url, ttl=1, **SMALL)
    try:
        deadline = time.monotonic() + 20
        while sandbox.refresh().state is SandboxState.RUNNING and time.monotonic() < deadline:
            time.sleep(0.2)
        assert sandbox.info.state is SandboxState.STOPPED and "ttl" in (sandbox.info.detail or "")
        assert sandbox.id not in fleet.containers()
    finally:
        sandbox.close()


@pytest.mark.slow
def test_restarting_the_admin_keeps_the_sandbox_list(fleet: LocalFleet):
    sandbox = Sandbox("busybox", admin_url=fleet.url, **SMALL)
    try:
        sandbox.run("cd /tmp && export KEPT=yes")
        fleet.admin.stop()
        fleet.admin.start()
        fleet.wait_for_workers()
        listed = {info["id"]: info["state"] for info in httpx.get(f"{fleet.url}/v1/sandboxes").json()}
        assert listed[sandbox.id] == "running"
        assert sandbox.run("echo $KEPT $(pwd)").output.strip() == "yes /tmp"
    finally:
        sandbox.close()
    assert sandbox.id not in fleet.containers()


@pytest.mark.slow
def test_killing_and_restarting_a_worker_leaves_no_orphan_container():
    fleet = LocalFleet(short_tmp("rock-e2e-w-"), f"e2e-w-{uuid.uuid4().hex[:6]}", local_worker=False)
    fleet.admin.start()
    fleet.worker.start()
    try:
        fleet.wait_for_workers()
        kept = Sandbox("busybox", admin_url=fleet.url, **SMALL)
        dropped = Sandbox("busybox", admin_url=fleet.url, **SMALL)
        kept.run("export MARK=adopted")
        assert fleet.containers() == {kept.id, dropped.id}
        fleet.worker.stop(signal.SIGKILL)
        dropped.close()  # the admin forgets it while its worker is down
        fleet.worker.start()
        deadline = time.monotonic() + 30
        while fleet.containers() != {kept.id} and time.monotonic() < deadline:
            time.sleep(0.2)
        assert fleet.containers() == {kept.id}
        assert kept.run("echo $MARK").output.strip() == "adopted"
        kept.close()
        assert fleet.containers() == set()
    finally:
        fleet.close()


@pytest.mark.slow
def test_a_fleet_beyond_127_0_0_1_refuses_requests_without_its_key():
    key = "secret-key-" + uuid.uuid4().hex
    fleet = LocalFleet(
        short_tmp("rock-e2e-a-"),
        f"e2e-a-{uuid.uuid4().hex[:6]}",
        local_worker=False,
        host="127.0.0.2",
        api_key=key,
    )
    keyless = LocalFleet(short_tmp("rock-e2e-a-"), "unused", local_worker=False, host="127.0.0.2")
    keyless.admin.start()
    fleet.admin.start()
    fleet.worker.start()
    try:
        assert keyless.admin.proc is not None and keyless.admin.proc.wait(timeout=60) == 2
        assert "needs an API key" in keyless.admin.log.read_text()
        keyless.close()
        fleet.wait_for_workers()
        assert httpx.get(f"{fleet.url}/v1/sandboxes").status_code == 401
        with pytest.raises(Unauthorized):
            Sandbox("busybox", admin_url=fleet.url, **SMALL)
        workers = httpx.get(f"{fleet.url}/v1/workers", headers={"Authorization": f"Bearer {key}"}).json()
        assert httpx.get(f"{workers[0]['url']}/v1/sandboxes").status_code == 401
        user_key = {"Authorization": f"Bearer {key}"}
        assert httpx.get(f"{workers[0]['url']}/v1/sandboxes", headers=user_key).status_code == 401
        with Sandbox("busybox", admin_url=fleet.url, api_key=key, **SMALL) as sandbox:
            assert sandbox.run("echo keyed").output.strip() == "keyed"
    finally:
        fleet.close()


@pytest.mark.slow
def test_the_sandbox_cli(fleet: LocalFleet):
    def rock(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "rock.cli", "sandbox", *args, "--admin-url", fleet.url],
            capture_output=True,
            text=True,
            timeout=120,
        )

    small = ["--image", "busybox", "--cpus", "0.25", "--memory", "64m"]
    refused = rock("create", *small, "--user", "alice")
    assert refused.returncode == 2 and "is not 'uid:gid', 'uid' or 'root'" in refused.stderr
    created = rock("create", *small, "--env", "WHO=cli", "--user", "root")
    assert created.returncode == 0, created.stderr
    sandbox_id = created.stdout.strip()
    listed = rock("ls")
    assert sandbox_id in listed.stdout and "running" in listed.stdout
    said = rock("exec", sandbox_id, "echo hello $WHO $(id -u); exit 3")
    assert (said.stdout, said.returncode) == ("hello cli 0\n", 3)
    assert rock("rm", sandbox_id).stdout.strip() == f"deleted {sandbox_id}"
    missing = rock("exec", sandbox_id, "true")
    assert missing.returncode == 1 and f"SandboxNotFound: no sandbox '{sandbox_id}'" in missing.stderr


def test_egress_is_opt_in_and_the_forwarder_reaches_a_host_socket(fleet: LocalFleet):
    with Sandbox("busybox", admin_url=fleet.url, network="bridge", **SMALL) as sandbox:
        assert "eth0" in sandbox.exec("cat /proc/net/dev").output
    with Sandbox("python:3.11", admin_url=fleet.url, **SMALL) as sandbox:
        assert sandbox.info.host_dir is not None
        path = f"{sandbox.info.host_dir}/model.sock"
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(path)
        os.chmod(path, 0o666)
        server.listen(1)
        answered = threading.Thread(target=_answer_once, args=(server,), daemon=True)
        answered.start()
        port = sandbox.forward(0)
        client = (
            f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=10)\n"
            "s.sendall(b'ping'); print(s.recv(100).decode())"
        )
        assert sandbox.exec(["python3", "-c", client], timeout=30).output.strip() == "pong to ping"
        answered.join(timeout=10)
        server.close()


def _answer_once(server: socket.socket) -> None:
    connection, _ = server.accept()
    with connection:
        connection.sendall(b"pong to " + connection.recv(100))


def test_an_egress_allowlist_lets_through_only_its_networks(fleet: LocalFleet):
    probe = (
        "import socket, sys\n"
        "s = socket.socket(); s.settimeout(5)\n"
        "try:\n"
        "    s.connect((sys.argv[1], int(sys.argv[2]))); print('connected')\n"
        "except OSError as e:\n"
        "    print('refused', e.errno)\n"
    )
    with Sandbox("python:3.11", admin_url=fleet.url, network="bridge", **SMALL) as server:
        address = server.exec("awk 'END { print $1 }' /etc/hosts").output.strip()
        server.run("python3 -m http.server 8000 >/dev/null 2>&1 &")
        with Sandbox(
            "python:3.11", admin_url=fleet.url, network="bridge", egress=[f"{address}/32"], **SMALL
        ) as sb:
            sb.write_file("/tmp/probe.py", probe)
            reached = ""
            for _ in range(50):  # the server may take a moment to listen
                reached = sb.exec(["python3", "/tmp/probe.py", address, "8000"], timeout=20).output.strip()
                if reached == "connected":
                    break
                time.sleep(0.2)
            assert reached == "connected"
            blocked = sb.exec(["python3", "/tmp/probe.py", "192.0.2.1", "80"], timeout=20).output.strip()
            assert blocked == "refused 101"  # ENETUNREACH from the sandbox's own firewall: nothing left it


@pytest.mark.slow
def test_a_create_waits_for_room_then_gets_it_or_429():
    fleet = LocalFleet(short_tmp("rock-e2e-q-"), f"e2e-q-{uuid.uuid4().hex[:6]}")
    fleet.admin.args += ["--worker-slots", "1"]
    fleet.admin.start()
    try:
        fleet.wait_for_workers()
        first = Sandbox("busybox", admin_url=fleet.url, **SMALL)
        queued: list[Sandbox] = []
        waiter = threading.Thread(
            target=lambda: queued.append(Sandbox("busybox", admin_url=fleet.url, queue_timeout=120, **SMALL))
        )
        waiter.start()
        deadline = time.monotonic() + 30
        while "rock_admission_waiting 1.0" not in httpx.get(f"{fleet.url}/metrics").text:
            assert time.monotonic() < deadline, "the second create never queued"
            time.sleep(0.1)
        with pytest.raises(CapacityExceeded, match=r"within 0\.5 s"):
            Sandbox("busybox", admin_url=fleet.url, queue_timeout=0.5, **SMALL)
        first.close()
        waiter.join(timeout=60)
        assert queued and queued[0].run("echo placed").output.strip() == "placed"
        queued[0].close()
    finally:
        fleet.close()
