"""The `packages` network policy on a worker: a sandbox with no network reaches the fleet's package cache.

The path is the model proxy's: inside the sandbox the rocklet listens on 127.0.0.1:`PYPI_PORT` (and
`APT_PORT`) and forwards each connection to a unix socket in the sandbox's socket folder; on the host the
worker listens on that socket and carries the bytes to the cache's loopback address. No bridge network, no
route out: the only thing the sandbox can reach is the cache. pip, uv and apt find it through the variables
and the apt configuration `sandbox_env` and `APT_CONF` give them.

The forwarder is read-only (rock.worker.package_gate): one GET or HEAD per connection, under devpi's mirror
index or one of apt-cacher's mirrors; anything else is answered by the worker and never reaches the cache.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from pathlib import Path

from rock.packages.apt import APT_MIRRORS, location_allowed
from rock.packages.cache import PYPI_INDEX, PYPI_PATH
from rock.runtime.home import ale_home
from rock.unix_sockets import bind_unix
from rock.worker.installers import CA_FILE, WGETRC_FILE, InstallerResponder
from rock.worker.package_gate import (
    MAX_HEAD,
    Refused,
    TargetRule,
    parse_head,
    pypi_rule,
    read_head,
    refusal,
)

PYPI_PORT = 3141
APT_PORT = 3142
PYPI_SOCKET = "pypi.sock"
APT_SOCKET = "apt.sock"
SOCKET_MOUNT = "/run/rock"
APT_CONF_PATH = "/etc/apt/apt.conf.d/00rock-package-cache"
APT_CONF = (
    f'Acquire::http::Proxy "http://127.0.0.1:{APT_PORT}";\n'
    'Acquire::https::Proxy "false";\n'
    # The forwarder answers one request per connection (rock.worker.package_gate).
    'Acquire::http::Pipeline-Depth "0";\n'
)
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
        # uv's install script (curl/wget https://astral.sh/uv/install.sh | sh) is answered by the forwarder
        # from the cache (rock.worker.installers); no other HTTPS request through it is answered.
        "https_proxy": f"http://127.0.0.1:{PYPI_PORT}",
        "HTTPS_PROXY": f"http://127.0.0.1:{PYPI_PORT}",
        "no_proxy": "127.0.0.1,localhost",
        "NO_PROXY": "127.0.0.1,localhost",
        "CURL_CA_BUNDLE": f"{SOCKET_MOUNT}/{CA_FILE}",
        "WGETRC": f"{SOCKET_MOUNT}/{WGETRC_FILE}",
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

    def __init__(
        self,
        pypi: str | None,
        apt: str | None,
        apt_mirrors: tuple[str, ...] = APT_MIRRORS,
        state_dir: Path | None = None,
    ) -> None:
        self.targets = {PYPI_SOCKET: pypi, APT_SOCKET: apt}
        # uv binaries taken from the cache's wheels, kept between runs (a few tens of MB per version).
        folder = state_dir or ale_home() / "uv-from-package-cache"
        self.installers = InstallerResponder(pypi, PYPI_PATH, folder) if pypi else None
        self.rules: dict[str, TargetRule] = {
            PYPI_SOCKET: pypi_rule(PYPI_INDEX),
            APT_SOCKET: lambda target: (
                None if location_allowed(target, apt_mirrors) else "only the configured Debian mirrors"
            ),
        }
        self._servers: dict[str, list[asyncio.AbstractServer]] = {}

    @property
    def available(self) -> bool:
        return self.targets[PYPI_SOCKET] is not None

    def forwards(self) -> list[tuple[int, str]]:
        """(port inside the sandbox, socket path inside it) for each cache this worker has."""
        ports = {PYPI_SOCKET: PYPI_PORT, APT_SOCKET: APT_PORT}
        return [(ports[name], f"{SOCKET_MOUNT}/{name}") for name, target in self.targets.items() if target]

    async def attach(self, sandbox_id: str, host_dir: Path) -> None:
        if self.installers is not None:
            await asyncio.to_thread(self.installers.install_ca, host_dir, SOCKET_MOUNT)
        servers = []
        for name, target in self.targets.items():
            if target is None:
                continue
            host, _, port = target.rpartition(":")
            # Mode 0666: the sandbox's user is not the worker's; set without following a swapped-in link.
            sock = bind_unix(host_dir / name, 0o666)
            installers = self.installers if name == PYPI_SOCKET else None
            handler = self._carry(host, int(port), self.rules[name], installers)
            servers.append(await asyncio.start_unix_server(handler, sock=sock, limit=MAX_HEAD))
        self._servers[sandbox_id] = servers

    async def detach(self, sandbox_id: str) -> None:
        for server in self._servers.pop(sandbox_id, []):
            server.close()
            with contextlib.suppress(Exception):  # closing a server whose socket folder is already gone
                await server.wait_closed()

    @staticmethod
    def _carry(  # type: ignore[no-untyped-def]
        host: str, port: int, rule: TargetRule, installers: InstallerResponder | None
    ):
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                request = parse_head(await read_head(reader), connect=installers is not None)
                if installers is not None and request.method == "CONNECT":
                    await installers.answer(request.target, reader, writer)
                    writer.close()
                    return
                why = rule(request.target)
                if why is not None:
                    raise Refused(403, "Forbidden", why)
            except (ConnectionError, OSError, ssl.SSLError):
                writer.close()
                return
            except Refused as error:
                with contextlib.suppress(ConnectionError, OSError):
                    writer.write(refusal(error))
                    await writer.drain()
                writer.close()
                return
            try:
                up_reader, up_writer = await asyncio.open_connection(host, port)
            except OSError:
                writer.close()
                return
            up_writer.write(request.head())
            await _pump(up_reader, writer)
            writer.close()
            up_writer.close()

        return handle
