"""Run the proxy: in the foreground (`rock proxy serve`) or in a background thread (`ProxyThread`)."""

from __future__ import annotations

import grp
import socket
import threading
import time
from pathlib import Path

import uvicorn

from rock.proxy.app import create_app
from rock.proxy.types import ProxyConfig
from rock.unix_sockets import bind_unix

START_TIMEOUT_S = 30


def _sockets(
    host: str, port: int, unix_socket: Path | None, socket_group: str | None = None
) -> list[socket.socket]:
    """The TCP socket, and the unix socket if asked for: owner-only (0600), or 0660 for `socket_group`'s
    members, the group the operator names (the proxy has no API keys: whoever can connect may chat)."""
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tcp.bind((host, port))
    sockets = [tcp]
    if unix_socket is not None:
        unix_socket.unlink(missing_ok=True)
        if socket_group is None:
            sockets.append(bind_unix(unix_socket, 0o600))
        else:
            try:
                gid = grp.getgrnam(socket_group).gr_gid
            except KeyError:
                raise ValueError(
                    f"no group {socket_group!r} on this host for --socket-group; create it or name another"
                ) from None
            sockets.append(bind_unix(unix_socket, 0o660, gid))
    return sockets


class ProxyThread:
    """The proxy served by uvicorn in a daemon thread on `host:port` (0: a free port) and an optional unix
    socket; `url` is its base URL."""

    def __init__(
        self, config: ProxyConfig, host: str = "127.0.0.1", port: int = 0, unix_socket: Path | None = None
    ) -> None:
        self.sockets = _sockets(host, port, unix_socket)
        self.port = self.sockets[0].getsockname()[1]
        self.url = f"http://{host}:{self.port}"
        self.app = create_app(config)
        self.server = uvicorn.Server(
            uvicorn.Config(self.app, log_level="warning", timeout_graceful_shutdown=5)
        )
        self.thread = threading.Thread(
            target=self.server.run,
            kwargs={"sockets": self.sockets},
            daemon=True,
            name=f"rock-proxy-{self.port}",
        )

    def __enter__(self) -> ProxyThread:
        self.thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the model proxy on port {self.port} did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)
        for sock in self.sockets:
            sock.close()


def serve(
    config: ProxyConfig, host: str, port: int, unix_socket: Path | None, socket_group: str | None = None
) -> None:
    uvicorn.Server(uvicorn.Config(create_app(config), log_level="info")).run(
        sockets=_sockets(host, port, unix_socket, socket_group)
    )
