"""Who may talk to a rocklet, on a local rocklet process (no Docker): its token, and only through a socket."""

import os
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rock.rocklet.client import RockletClient
from rock.rocklet.errors import SocketTampered, Unauthorized

TOKEN = "t" * 64


@pytest.fixture
def rocklet(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path
    token_file = folder / ".token"
    token_file.write_text(TOKEN)
    socket_path = folder / "rocklet.sock"
    proc = subprocess.Popen(
        [sys.executable, "-m", "rock.rocklet", "--socket", str(socket_path), "--token-file", str(token_file)]
    )
    yield socket_path
    proc.terminate()
    assert proc.wait(timeout=10) == 0


async def test_the_token_is_required_and_its_file_is_gone_once_read(rocklet: Path):
    async with RockletClient(rocklet, token=TOKEN) as client:
        await client.wait_ready(timeout=20)
        assert (await client.exec(["echo", "ok"])).output == "ok\n"
    assert not (rocklet.parent / ".token").exists()
    assert stat.S_IMODE(os.stat(rocklet).st_mode) == 0o600
    for token in (None, "wrong"):
        async with RockletClient(rocklet, token=token) as stranger:
            with pytest.raises(Unauthorized, match="token"):
                await stranger.exec(["echo", "not run"])


async def test_a_symlink_in_place_of_the_socket_is_refused_not_followed(rocklet: Path):
    async with RockletClient(rocklet, token=TOKEN) as client:
        await client.wait_ready(timeout=20)
    decoy = socket.socket(socket.AF_UNIX)
    decoy_path = rocklet.parent / "decoy.sock"
    decoy.bind(str(decoy_path))
    decoy.listen()
    try:
        rocklet.unlink()
        rocklet.symlink_to(decoy_path)
        async with RockletClient(rocklet, token=TOKEN) as client:
            with pytest.raises(SocketTampered, match="symlink"):
                await client.health()
        decoy.setblocking(False)
        with pytest.raises(BlockingIOError):
            decoy.accept()  # nothing ever connected to what the symlink pointed at
    finally:
        decoy.close()
