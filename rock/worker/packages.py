"""The `packages` network policy on a worker: a sandbox with no network reaches the fleet's package cache.

The path is the model proxy's: inside the sandbox the rocklet listens on 127.0.0.1:`PYPI_PORT` (and
`APT_PORT`) and forwards each connection to a unix socket in the sandbox's socket folder; on the host the
worker listens on that socket and carries the bytes to the cache's loopback address. No bridge network, no
route out: the only thing the sandbox can reach is the cache. pip, uv and apt find it through the variables
and the apt configuration `sandbox_env` and `APT_CONF` give them.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from rock.packages.cache import PYPI_PATH
from rock.unix_sockets import bind_unix

PYPI_PORT = 3141
APT_PORT = 3142
PYPI_SOCKET = "pypi.sock"
APT_SOCKET = "apt.sock"
SOCKET_MOUNT = "/run/rock"
APT_CONF_PATH = "/etc/apt/apt.conf.d/00rock-package-cache"
APT_CONF = f'Acquire::http::Proxy "http://127.0.0.1:{APT_PORT}";\nAcquire::https::Proxy "false";\n'
CHUNK = 1 << 16


def sandbox_env() -> dict[str, str]:
    """What points pip and uv (and their `uvx`, `uv pip`) at the cache through the in-sandbox forwarder."""
    index = f"http://127.0.0.1:{PYPI_PORT}{PYPI_PATH}"
    return {
        "PIP_INDEX_URL": index,
        "PIP_TRUSTED_HOST": f"127.0.0.1:{PYPI_PORT}",
        "UV_DEFAULT_INDEX": index,
        "UV_INDEX_URL": index,
        # uv would otherwise download a Python build from outside when a test asks for another version.
        "UV_PYTHON_DOWNLOADS": "never",
    }


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        writer.close()


class PackageBridges:
    """Per sandbox: unix-socket listeners in its socket folder that connect to the cache's TCP addresses."""

    def __init__(self, pypi: str | None, apt: str | None) -> None:
        self.targets = {PYPI_SOCKET: pypi, APT_SOCKET: apt}
        self._servers: dict[str, list[asyncio.AbstractServer]] = {}

    @property
    def available(self) -> bool:
        return self.targets[PYPI_SOCKET] is not None

    def forwards(self) -> list[tuple[int, str]]:
        """(port inside the sandbox, socket path inside it) for each cache this worker has."""
        ports = {PYPI_SOCKET: PYPI_PORT, APT_SOCKET: APT_PORT}
        return [(ports[name], f"{SOCKET_MOUNT}/{name}") for name, target in self.targets.items() if target]

    async def attach(self, sandbox_id: str, host_dir: Path) -> None:
        servers = []
        for name, target in self.targets.items():
            if target is None:
                continue
            host, _, port = target.rpartition(":")
            # Mode 0666: the sandbox's user is not the worker's; set without following a swapped-in link.
            sock = bind_unix(host_dir / name, 0o666)
            servers.append(await asyncio.start_unix_server(self._carry(host, int(port)), sock=sock))
        self._servers[sandbox_id] = servers

    async def detach(self, sandbox_id: str) -> None:
        for server in self._servers.pop(sandbox_id, []):
            server.close()
            with contextlib.suppress(Exception):  # closing a server whose socket folder is already gone
                await server.wait_closed()

    @staticmethod
    def _carry(host: str, port: int):  # type: ignore[no-untyped-def]
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                up_reader, up_writer = await asyncio.open_connection(host, port)
            except OSError:
                writer.close()
                return
            await asyncio.gather(_pump(reader, up_writer), _pump(up_reader, writer))
            writer.close()
            up_writer.close()

        return handle
