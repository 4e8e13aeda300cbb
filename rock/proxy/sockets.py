"""A sandbox's unix socket: requests that arrive on it belong to that sandbox, and may only chat."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from pathlib import Path

import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send

from rock.proxy.errors import ProxyError
from rock.proxy.types import EPISODE_HEADER, SANDBOX_HEADER
from rock.unix_sockets import bind_unix

MODEL_ROUTES = ("/v1/",)


class SandboxScope:
    """Tags every request with its sandbox or episode (replacing any such header the sandbox sent) and
    refuses everything but the model routes, so code in a sandbox cannot read or end episodes."""

    def __init__(self, app: ASGIApp, sandbox_id: str, episode_id: str | None = None) -> None:
        self.app = app
        self.tag = (SANDBOX_HEADER, sandbox_id) if episode_id is None else (EPISODE_HEADER, episode_id)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            if not scope["path"].startswith(MODEL_ROUTES):
                await ProxyError(
                    "a sandbox may only call the model routes under /v1/", status=404, code="not_found"
                ).response()(scope, receive, send)
                return
            headers = [
                (k, v)
                for k, v in scope["headers"]
                if k not in (SANDBOX_HEADER.encode(), EPISODE_HEADER.encode())
            ]
            scope = dict(scope, headers=[*headers, (self.tag[0].encode(), self.tag[1].encode())])
        await self.app(scope, receive, send)


class SocketListeners:
    """One uvicorn server per attached sandbox socket, on the proxy's own event loop."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._servers: dict[str, tuple[uvicorn.Server, asyncio.Task[None], socket.socket, Path]] = {}

    async def attach(self, sandbox_id: str, path: str, episode_id: str | None = None) -> None:
        await self.detach(sandbox_id)
        target = Path(path)
        if not target.parent.is_dir():
            raise ProxyError(
                f"cannot listen on {path}: its folder does not exist (is the sandbox running?)",
                status=422,
                code="invalid_value",
            )
        target.unlink(missing_ok=True)
        try:
            sock = bind_unix(target, 0o666)  # the sandbox's user is not the proxy's
        except OSError as error:
            raise ProxyError(f"cannot listen on {path}: {error}", status=422, code="invalid_value") from error
        config = uvicorn.Config(
            SandboxScope(self.app, sandbox_id, episode_id), log_level="warning", lifespan="off"
        )
        server = uvicorn.Server(config)
        task = asyncio.create_task(server.serve(sockets=[sock]))
        self._servers[sandbox_id] = (server, task, sock, target)

    async def detach(self, sandbox_id: str) -> bool:
        entry = self._servers.pop(sandbox_id, None)
        if entry is None:
            return False
        server, task, sock, path = entry
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError, TimeoutError):
            await asyncio.wait_for(task, timeout=10)
        sock.close()
        path.unlink(missing_ok=True)
        return True

    async def close(self) -> None:
        for sandbox_id in list(self._servers):
            await self.detach(sandbox_id)
