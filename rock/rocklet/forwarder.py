"""TCP listeners on 127.0.0.1 inside the sandbox that forward each connection to a unix socket.

A sandbox has no network, yet an agent inside it must reach its model: it connects to 127.0.0.1:<port>, and
the rocklet carries the bytes to a socket in the bind-mounted folder, where a host-side service listens.
asyncio is imported on the first forwarder only, to keep the rocklet's start fast.
"""

from __future__ import annotations

import threading

from rock.rocklet.errors import BadRequest, ForwarderError

# Importing typing adds ~4 ms to every sandbox's start; only type checkers need it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

CHUNK = 1 << 16


class Forwarders:
    def __init__(self) -> None:
        self._loop: Any = None
        # asyncio holds its servers and their connections' tasks only weakly: without these references the
        # garbage collector can end a forwarder, or a connection it is carrying, at any time.
        self._servers: list[Any] = []
        self._connections: set[Any] = set()
        self._lock = threading.Lock()
        self.targets: dict[int, str] = {}

    def _event_loop(self) -> Any:
        import asyncio

        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            threading.Thread(target=self._loop.run_forever, name="forwarders", daemon=True).start()
        return self._loop

    def start(self, port: int, target_socket: str, host: str = "127.0.0.1") -> int:
        """Listen on host:port (0: any free port) and return the port; repeating a request is a no-op."""
        import asyncio

        if not 0 <= port <= 65535:
            raise BadRequest(f"port {port} is out of range: use 0-65535")
        with self._lock:
            if port and port in self.targets:
                if self.targets[port] != target_socket:
                    raise ForwarderError(
                        f"port {port} already forwards to {self.targets[port]}; pick another port"
                    )
                return port
            future = asyncio.run_coroutine_threadsafe(
                self._listen(host, port, target_socket), self._event_loop()
            )
            try:
                bound = future.result(timeout=10)
            except OSError as exc:
                raise ForwarderError(
                    f"cannot listen on {host}:{port}: {exc.strerror}; pick another port"
                ) from None
            self.targets[bound] = target_socket
            return bound

    async def _listen(self, host: str, port: int, target_socket: str) -> int:
        import asyncio

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            self._connections.add(task)
            try:
                try:
                    up_reader, up_writer = await asyncio.open_unix_connection(target_socket)
                except OSError:
                    writer.close()
                    return
                await asyncio.gather(_pump(reader, up_writer), _pump(up_reader, writer))
                writer.close()
                up_writer.close()
            finally:
                self._connections.discard(task)

        server = await asyncio.start_server(handle, host, port)
        self._servers.append(server)
        return int(server.sockets[0].getsockname()[1])


async def _pump(reader: Any, writer: Any) -> None:
    """Copy one direction until EOF, then half-close so the other direction can finish."""
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        writer.close()
