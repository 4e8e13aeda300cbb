"""The bundled runtime: built once, runs through its own loader, and serves the rocklet inside images that
have no Python (busybox) with no network, a read-only mount and an unprivileged uid (Docker tests marked)."""

import asyncio
import os
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from rock.images import BUSYBOX, PYTHON, ensure_base_images
from rock.rocklet.client import RockletClient
from rock.rocklet.errors import ShellUnavailable
from rock.runtime import (
    ROCKLET_SOCKET,
    RUNTIME_MOUNT,
    ensure_runtime,
    rocklet_container_command,
    rocklet_container_env,
)


@pytest.fixture(scope="module")
def runtime() -> Path:
    return ensure_runtime()


def test_runtime_is_cached_and_holds_what_the_rocklet_needs(runtime: Path) -> None:
    assert ensure_runtime() == runtime
    assert (runtime / "lib" / "ld.so").is_file() and (runtime / "bin" / "python3").is_file()
    stdlib = runtime / "lib" / "python3.11"
    assert (stdlib / "os.py").is_file() and (stdlib / "lib-dynload").is_dir()
    assert not (stdlib / "test").exists() and not (stdlib / "tkinter").exists()
    shipped = {p.name for p in (stdlib / "rock" / "rocklet").glob("*.py")}
    assert {"server.py", "shell.py", "__main__.py"} <= shipped
    assert "client.py" not in shipped


@pytest.mark.slow
def test_fresh_build_links_the_python_part(tmp_path: Path) -> None:
    built = ensure_runtime(home=tmp_path)
    stamp = (built / "STAMP").stat().st_mtime_ns
    assert ensure_runtime(home=tmp_path) == built
    assert (built / "STAMP").stat().st_mtime_ns == stamp
    (python_part,) = (tmp_path / "runtime").glob("python-*")
    assert (built / "bin" / "python3").stat().st_ino == (python_part / "bin" / "python3").stat().st_ino
    assert not list((tmp_path / "runtime").glob("*.partial"))


def test_bundled_interpreter_runs_through_its_loader_with_an_empty_environment(runtime: Path) -> None:
    command = rocklet_container_command(mount=str(runtime))[:4]
    script = "import sys, ssl, json, pty, rock.rocklet.server; print(sys.prefix)"
    result = subprocess.run(
        ["env", "-i", *command, "-I", "-S", "-c", script], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == str(runtime)


def test_container_command_and_env() -> None:
    command = rocklet_container_command()
    assert command[0] == f"{RUNTIME_MOUNT}/lib/ld.so"
    assert command[-2:] == ["--socket", ROCKLET_SOCKET]
    assert rocklet_container_env() == {}


@pytest.fixture(scope="module")
def rocklet_containers(runtime: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """One locked-down sandbox per image: busybox (no Python, no libc) and the Python image (bash)."""
    import docker

    ensure_base_images()
    client = docker.from_env()
    sockets, containers = {}, []
    try:
        for image in (BUSYBOX, PYTHON):
            folder = tmp_path_factory.mktemp("sandbox")
            folder.chmod(0o777)
            containers.append(
                client.containers.run(
                    image,
                    rocklet_container_command(),
                    environment=rocklet_container_env(),
                    name=f"ale-test-rocklet-{uuid.uuid4().hex[:8]}",
                    detach=True,
                    user="1000:1000",
                    network_mode="none",
                    cap_drop=["ALL"],
                    security_opt=["no-new-privileges"],
                    pids_limit=256,
                    mem_limit="512m",
                    volumes={
                        str(runtime): {"bind": RUNTIME_MOUNT, "mode": "ro"},
                        str(folder): {"bind": "/run/rock", "mode": "rw"},
                    },
                )
            )
            sockets[image] = folder
        yield sockets
    finally:
        for container in containers:
            container.remove(force=True)


@pytest.fixture(params=[BUSYBOX, PYTHON])
async def sandbox(
    request: Any, rocklet_containers: dict[str, Path]
) -> AsyncIterator[tuple[RockletClient, Path]]:
    folder = rocklet_containers[request.param]
    async with RockletClient(folder / "rocklet.sock") as client:
        await client.wait_ready(timeout=30)
        yield client, folder


@pytest.mark.docker
async def test_rocklet_serves_a_session_in_a_locked_down_sandbox(sandbox: tuple[RockletClient, Path]) -> None:
    client, _ = sandbox
    health = await client.health()
    assert health.pid == 1
    await client.run("cd /tmp && export MARK=kept", "agent")
    result = await client.run("pwd; echo $MARK; id -u; cat /proc/net/dev | grep -c ':'", "agent")
    assert result.output.split() == ["/tmp", "kept", "1000", "1"]
    timed = await client.run("sleep 100; echo not-reached", "agent", timeout=1)
    assert timed.timed_out and "not-reached" not in timed.output
    assert (await client.run("echo $MARK; pwd", "agent")).output == "kept\n/tmp\n"
    big = await client.run("yes | head -c 20000000", "agent", max_output=1000)
    assert big.truncated and big.exit_code == 0
    blocked = await client.exec(["touch", f"{RUNTIME_MOUNT}/x"])
    assert blocked.exit_code != 0
    await client.write_file("/tmp/note.txt", b"hello")
    assert await client.read_file("/tmp/note.txt") == b"hello"


@pytest.mark.docker
async def test_rocklet_as_pid_1_reaps_orphans(sandbox: tuple[RockletClient, Path]) -> None:
    client, _ = sandbox
    await client.run("for i in 1 2 3 4 5; do (sleep 0.1 &) ; done", "orphans")
    count = "cat /proc/[0-9]*/stat 2>/dev/null | awk '$3 == \"Z\"' | wc -l"
    zombies = None
    for _ in range(30):
        await asyncio.sleep(0.2)
        zombies = (await client.exec(count)).output.strip()
        if zombies == "0":
            break
    assert zombies == "0"


@pytest.mark.docker
async def test_forwarder_reaches_a_host_socket_from_a_sandbox_without_network(
    sandbox: tuple[RockletClient, Path],
) -> None:
    client, folder = sandbox

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        body = b'{"models": ["scripted"]}'
        writer.write(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        writer.close()

    host_socket = folder / f"model-{uuid.uuid4().hex[:6]}.sock"
    server = await asyncio.start_unix_server(answer, path=str(host_socket))
    os.chmod(host_socket, 0o666)
    async with server:
        info = await client.start_forwarder(0, f"/run/rock/{host_socket.name}")
        fetch = "wget -qO- http://127.0.0.1:{port}/v1/models 2>&1 || python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{port}/v1/models').read().decode())\""
        result = await client.run(fetch.format(port=info.port), "net", timeout=20)
        assert '{"models": ["scripted"]}' in result.output


@pytest.mark.docker
async def test_rocklet_runs_in_an_empty_image(runtime: Path, tmp_path: Path) -> None:
    """Nothing in the image at all (no shell, no libc): exec of an argv still works, sessions say why not."""
    import docker

    empty = subprocess.run(["tar", "-cf", "-", "--files-from", "/dev/null"], capture_output=True, check=True)
    subprocess.run(
        ["docker", "import", "-", "ale/test-empty:1"], input=empty.stdout, capture_output=True, check=True
    )
    tmp_path.chmod(0o777)
    container = docker.from_env().containers.run(
        "ale/test-empty:1",
        rocklet_container_command(),
        detach=True,
        user="1000:1000",
        network_mode="none",
        volumes={
            str(runtime): {"bind": RUNTIME_MOUNT, "mode": "ro"},
            str(tmp_path): {"bind": "/run/rock", "mode": "rw"},
        },
    )
    try:
        async with RockletClient(tmp_path / "rocklet.sock") as client:
            await client.wait_ready(timeout=30)
            python = [*rocklet_container_command()[:4], "-I", "-S", "-c", "print('bundled python')"]
            assert (await client.exec(python)).output == "bundled python\n"
            with pytest.raises(ShellUnavailable, match="no shell"):
                await client.run("true")
    finally:
        container.remove(force=True)


@pytest.mark.docker
@pytest.mark.slow
async def test_fork_bomb_and_memory_hog_are_contained(rocklet_containers: dict[str, Path]) -> None:
    async with RockletClient(rocklet_containers[PYTHON] / "rocklet.sock") as client:
        await client.wait_ready(timeout=30)
        await client.run("export KEPT=1", "bomb")
        bomb = await client.run("bomb() { bomb | bomb & }; bomb; sleep 100", "bomb", timeout=3)
        assert bomb.timed_out
        assert (await client.health()).status == "ok"
        hog = await client.run("python3 -c 'x = bytearray(2 * 1024**3)'", "hog", timeout=60)
        assert hog.exit_code in (1, 137)
        after = await client.run("echo $KEPT", "bomb")
        assert after.output.endswith("1\n") and after.exit_code == 0
