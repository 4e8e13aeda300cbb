"""`RockletClient`: the async client of one rocklet, over its unix socket (httpx).

The socket lives in a folder the sandbox can write, so the sandbox could put anything at its path (a
symlink to the host's Docker socket, say). Every connection therefore opens the path without following a
symlink, checks that it is a socket, and connects through that very file (`/proc/self/fd/N`), so nothing
can be swapped in between the check and the connect.

A real socket at the path may still be an impostor's: sandbox code can rename the rocklet's socket and
listen at the old path. So a client given the rocklet's pid (the container's init process, as the host
sees it) asks the kernel who listens on the other end (SO_PEERCRED: the pid that called listen()) before it
sends a byte, and refuses any other process: an impostor never sees a request, so never the token.
"""

import asyncio
import os
import socket
import stat
import struct
import time
from collections.abc import AsyncIterable, Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpcore
import httpx

from rock.observation import Observation
from rock.rocklet.errors import ERROR_TYPES, RockletError, RockletUnavailable, SocketTampered
from rock.rocklet.output import DEFAULT_MAX_OUTPUT
from rock.rocklet.types import (
    ForwarderInfo,
    ForwarderRequest,
    RockletErrorBody,
    RockletExecRequest,
    RockletHealth,
    RockletRunRequest,
    RockletSessionRequest,
)

DEFAULT_TIMEOUT = 60.0
# Time the HTTP request may take beyond the command's own timeout (killing, reporting, a busy host).
REQUEST_MARGIN = 30.0
TRANSFER_TIMEOUT = 600.0
"""Seconds a file write or an upload may take (the admin allows the same)."""
Content = bytes | AsyncIterable[bytes]


def open_socket(path: str) -> int:
    """An O_PATH descriptor of the socket at `path`, never through a symlink; SocketTampered for anything
    that is not a socket, httpcore.ConnectError (as for a refused connect) when nothing is there."""
    try:
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise httpcore.ConnectError(f"cannot open the rocklet's socket {path}: {exc.strerror}") from exc
    kind = stat.S_IFMT(os.fstat(fd).st_mode)
    if kind != stat.S_IFSOCK:
        os.close(fd)
        found = "a symlink" if kind == stat.S_IFLNK else f"a file of type {oct(kind)}"
        raise SocketTampered(
            f"{path} is {found}, not the rocklet's socket: the sandbox replaced it, so the worker no longer "
            "talks to this sandbox; delete it and create a new one"
        )
    return fd


RockletPid = Callable[[], Awaitable[int]]
"""What tells the client the rocklet's pid as this host sees it (asked once per new connection)."""
_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


def peer_pid(sock: socket.socket) -> int:
    """The pid of the process that listens on the other end of a connected unix socket (from the kernel)."""
    pid, _, _ = _PEERCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
    return pid


class _SocketOnlyBackend(httpcore.AnyIOBackend):
    def __init__(self, rocklet_pid: RockletPid | None) -> None:
        self._rocklet_pid = rocklet_pid

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.AsyncNetworkStream:
        fd = open_socket(path)
        try:
            stream = await super().connect_unix_socket(f"/proc/self/fd/{fd}", timeout, socket_options)
        finally:
            os.close(fd)
        if self._rocklet_pid is not None:
            try:
                await self._check_peer(path, stream)
            except BaseException:
                await stream.aclose()
                raise
        return stream

    async def _check_peer(self, path: str, stream: httpcore.AsyncNetworkStream) -> None:
        assert self._rocklet_pid is not None
        expected = await self._rocklet_pid()
        found = peer_pid(stream.get_extra_info("socket"))
        if found != expected:
            raise SocketTampered(
                f"{path} is served by process {found}, not by the sandbox's rocklet (process {expected}): "
                "code in the sandbox put its own listener there, so the worker sent it nothing and no longer "
                "talks to this sandbox; delete it and create a new one"
            )


class _SocketTransport(httpx.AsyncHTTPTransport):
    def __init__(self, path: str, rocklet_pid: RockletPid | None) -> None:
        # Plain HTTP over a unix socket: no TLS ever, so no CA store is loaded (that would cost ~20 ms of CPU
        # for each sandbox's client).
        super().__init__(uds=path, verify=False)
        # httpx takes no network backend of its own choosing, so its pool is rebuilt with the checking one.
        self._pool = httpcore.AsyncConnectionPool(
            uds=path,
            network_backend=_SocketOnlyBackend(rocklet_pid),
            max_connections=100,
            keepalive_expiry=5.0,
        )


class RockletClient:
    def __init__(
        self,
        socket_path: str | Path,
        request_timeout: float = 60.0,
        token: str | None = None,
        rocklet_pid: RockletPid | None = None,
    ) -> None:
        """`token`: the sandbox's rocklet token, sent with every request (a rocklet started with one refuses
        requests without it). `rocklet_pid`: the rocklet's pid as this host sees it; with it, a connection
        to any other listener is refused (SocketTampered) before a request goes out."""
        self.socket_path = str(socket_path)
        self._http = httpx.AsyncClient(
            transport=_SocketTransport(self.socket_path, rocklet_pid),
            base_url="http://rocklet",
            verify=False,
            timeout=request_timeout,
            headers={"Authorization": f"Bearer {token}"} if token else None,
        )

    async def __aenter__(self) -> "RockletClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _request(self, method: str, url: str, stream: bool = False, **kwargs: Any) -> httpx.Response:
        """The rocklet's answer, or its error raised; with `stream`, the body is not read yet (close it)."""
        try:
            response = await self._http.send(self._http.build_request(method, url, **kwargs), stream=stream)
        except httpx.TimeoutException:
            raise RockletUnavailable(
                f"rocklet at {self.socket_path} did not answer {method} {url} in time; "
                "the sandbox may be overloaded or stopped"
            ) from None
        except httpx.TransportError as exc:
            raise RockletUnavailable(
                f"rocklet at {self.socket_path} is unreachable ({exc or type(exc).__name__}); "
                "is the sandbox running and its socket folder mounted?"
            ) from None
        if response.status_code >= 400:
            if stream:
                await response.aread()
                await response.aclose()
            raise _error_from(response)
        return response

    async def wait_ready(self, timeout: float = 30.0) -> RockletHealth:
        """Poll /health until the rocklet answers; RockletUnavailable after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        delay = 0.005
        while True:
            try:
                return await self.health(timeout=max(min(deadline - time.monotonic(), 5.0), 0.1))
            except RockletUnavailable as exc:
                if time.monotonic() + delay > deadline:
                    raise RockletUnavailable(
                        f"rocklet did not become ready within {timeout:g} s: {exc}"
                    ) from None
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.02)

    async def health(self, timeout: float = 10.0) -> RockletHealth:
        response = await self._request("GET", "/health", timeout=timeout)
        return RockletHealth.model_validate_json(response.content)

    async def create_session(
        self, name: str, env: dict[str, str] | None = None, cwd: str | None = None
    ) -> None:
        body = RockletSessionRequest(name=name, env=env, cwd=cwd)
        await self._request("POST", "/sessions", json=body.model_dump())

    async def run(
        self,
        cmd: str,
        session: str = "default",
        timeout: float = DEFAULT_TIMEOUT,
        max_output: int = DEFAULT_MAX_OUTPUT,
    ) -> Observation:
        """Run `cmd` in the named persistent session (opened on first use)."""
        body = RockletRunRequest(cmd=cmd, timeout=timeout, max_output=max_output)
        response = await self._request(
            "POST",
            f"/sessions/{quote(session, safe='')}/run",
            json=body.model_dump(),
            timeout=timeout + REQUEST_MARGIN,
        )
        return Observation.model_validate_json(response.content)

    async def close_session(self, name: str) -> None:
        await self._request("DELETE", f"/sessions/{quote(name, safe='')}")

    async def exec(
        self,
        cmd: str | list[str],
        timeout: float = DEFAULT_TIMEOUT,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        max_output: int = DEFAULT_MAX_OUTPUT,
    ) -> Observation:
        """Run `cmd` as a fresh process (a string goes through the shell; a list runs as argv)."""
        body = RockletExecRequest(cmd=cmd, timeout=timeout, cwd=cwd, env=env, max_output=max_output)
        response = await self._request(
            "POST", "/exec", json=body.model_dump(), timeout=timeout + REQUEST_MARGIN
        )
        return Observation.model_validate_json(response.content)

    async def read_file(self, path: str) -> bytes:
        return (await self._request("GET", "/files", params={"path": path})).content

    async def write_file(self, path: str, data: Content, mode: int | None = None) -> None:
        """Write `data` (bytes, or pieces of them streamed through) to `path` inside the sandbox."""
        params = {"path": path} | ({"mode": format(mode, "o")} if mode is not None else {})
        await self._request("PUT", "/files", params=params, content=data, timeout=TRANSFER_TIMEOUT)

    async def upload(self, tar: Content, dest: str) -> None:
        """Unpack a tar archive (bytes, or pieces of them streamed through) under `dest` inside the
        sandbox."""
        await self._request("PUT", "/archive", params={"dest": dest}, content=tar, timeout=TRANSFER_TIMEOUT)

    async def download(self, path: str) -> bytes:
        """A tar archive of `path` (file or folder) inside the sandbox, named by its last component."""
        return (await self._request("GET", "/archive", params={"path": path})).content

    async def open_download(self, path: str) -> httpx.Response:
        """`download` as a response whose body is still to be read (`aiter_raw`, then `aclose`)."""
        return await self._request(
            "GET", "/archive", stream=True, params={"path": path}, timeout=TRANSFER_TIMEOUT
        )

    async def start_forwarder(self, port: int, target_socket: str = "/run/rock/model.sock") -> ForwarderInfo:
        """Listen on 127.0.0.1:`port` inside the sandbox and forward each connection to `target_socket`."""
        body = ForwarderRequest(port=port, target_socket=target_socket)
        response = await self._request("POST", "/forwarders", json=body.model_dump())
        return ForwarderInfo.model_validate_json(response.content)


def _error_from(response: httpx.Response) -> RockletError:
    try:
        info = RockletErrorBody.model_validate_json(response.content).error
    except ValueError:
        return RockletError(f"rocklet answered HTTP {response.status_code}: {response.text[:500]}")
    return ERROR_TYPES.get(info.type, RockletError)(info.message)
