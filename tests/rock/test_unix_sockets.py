"""Host sockets in a folder the sandbox can write: their mode is never set through a link the sandbox swapped
in between bind and chmod (issue 26, item 10), and the proxy's own socket is owner-only."""

from __future__ import annotations

import _socket
import asyncio
import os
import socket
import stat
from pathlib import Path

import pytest

from rock.proxy.errors import ProxyError
from rock.proxy.server import _sockets
from rock.proxy.sockets import SocketListeners
from rock.worker.packages import PYPI_SOCKET, PackageBridges


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A host file outside the socket folder that the sandbox wants to make world-writable."""
    path = tmp_path / "shadow"
    path.write_text("root:secret\n")
    path.chmod(0o600)
    return path


@pytest.fixture
def swap_after_bind(monkeypatch: pytest.MonkeyPatch, victim: Path):
    """The sandbox winning the race: right after the host binds `name` in the socket folder, the new
    socket is replaced by a symlink to the victim (what a process watching the folder does)."""

    def arm(folder: Path, name: str) -> None:
        def racing_bind(self: socket.socket, address: object) -> None:
            _socket.socket.bind(self, address)
            if address == str(folder / name):
                os.unlink(address)
                os.symlink(victim, address)

        monkeypatch.setattr(socket.socket, "bind", racing_bind)

    return arm


def test_proxy_socket_listener_does_not_chmod_through_a_swapped_link(tmp_path, victim, swap_after_bind):
    folder = tmp_path / "sock"
    folder.mkdir()
    swap_after_bind(folder, "model.sock")

    async def attach() -> None:
        listeners = SocketListeners(app=None)  # type: ignore[arg-type]
        await listeners.attach("sbx", str(folder / "model.sock"))

    with pytest.raises(ProxyError, match="no longer the socket"):
        asyncio.run(attach())
    assert stat.S_IMODE(victim.stat().st_mode) == 0o600


def test_package_bridge_does_not_chmod_through_a_swapped_link(tmp_path, victim, swap_after_bind):
    folder = tmp_path / "sock"
    folder.mkdir()
    swap_after_bind(folder, PYPI_SOCKET)

    async def attach() -> None:
        await PackageBridges("127.0.0.1:1", None).attach("sbx", folder)

    with pytest.raises(OSError, match="no longer the socket"):
        asyncio.run(attach())
    assert stat.S_IMODE(victim.stat().st_mode) == 0o600


def test_package_bridge_socket_is_reachable_by_the_sandbox_user(tmp_path):
    folder = tmp_path / "sock"
    folder.mkdir()

    async def attach() -> int:
        bridges = PackageBridges("127.0.0.1:1", None)
        await bridges.attach("sbx", folder)
        mode = stat.S_IMODE((folder / PYPI_SOCKET).stat().st_mode)
        await bridges.detach("sbx")
        return mode

    assert asyncio.run(attach()) == 0o666


def test_proxy_unix_socket_is_owner_only(tmp_path):
    path = tmp_path / "proxy.sock"
    sockets = _sockets("127.0.0.1", 0, path)
    try:
        assert stat.S_ISSOCK(path.stat().st_mode)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    finally:
        for sock in sockets:
            sock.close()


def test_proxy_unix_socket_for_a_named_group(tmp_path):
    import grp

    group = grp.getgrgid(os.getegid())
    path = tmp_path / "proxy.sock"
    sockets = _sockets("127.0.0.1", 0, path, socket_group=group.gr_name)
    try:
        assert stat.S_IMODE(path.stat().st_mode) == 0o660
        assert path.stat().st_gid == group.gr_gid
    finally:
        for sock in sockets:
            sock.close()
    with pytest.raises(ValueError, match="no group"):
        _sockets("127.0.0.1", 0, tmp_path / "other.sock", socket_group="no-such-group-ale")
