"""The rocklet client's peer check on a local rocklet (no Docker): only the rocklet's own pid is served."""

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rock.rocklet.client import RockletClient
from rock.rocklet.errors import SocketTampered

TOKEN = "p" * 64


@pytest.fixture
def rocklet(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    token_file = tmp_path / ".token"
    token_file.write_text(TOKEN)
    socket_path = tmp_path / "rocklet.sock"
    proc = subprocess.Popen(
        [sys.executable, "-m", "rock.rocklet", "--socket", str(socket_path), "--token-file", str(token_file)]
    )
    yield socket_path, proc.pid
    proc.terminate()
    assert proc.wait(timeout=10) == 0


def _pid(value: int):
    async def rocklet_pid() -> int:
        return value

    return rocklet_pid


async def test_the_rocklet_itself_is_served(rocklet: tuple[Path, int]):
    socket_path, pid = rocklet
    async with RockletClient(socket_path, token=TOKEN, rocklet_pid=_pid(pid)) as client:
        await client.wait_ready(timeout=20)
        assert (await client.exec(["echo", "ok"])).output == "ok\n"


async def test_a_listener_of_another_process_at_the_path_gets_not_a_byte(rocklet: tuple[Path, int]):
    socket_path, pid = rocklet
    async with RockletClient(socket_path, token=TOKEN, rocklet_pid=_pid(pid)) as client:
        await client.wait_ready(timeout=20)
    os.rename(socket_path, socket_path.with_name("real.sock"))
    impostor = socket.socket(socket.AF_UNIX)
    impostor.bind(str(socket_path))
    impostor.listen()
    try:
        async with RockletClient(socket_path, token=TOKEN, rocklet_pid=_pid(pid)) as client:
            with pytest.raises(SocketTampered, match="not by the sandbox's rocklet"):
                await client.read_file("/etc/hostname")
        conn, _ = impostor.accept()
        conn.settimeout(5)
        assert conn.recv(1024) == b""  # closed without a request: the token never went out
        conn.close()
    finally:
        impostor.close()
        os.rename(socket_path.with_name("real.sock"), socket_path)
