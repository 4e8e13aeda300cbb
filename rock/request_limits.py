"""Request body limits for the admin's and the workers' HTTP servers (an ASGI middleware), and the watch that
tells a handler its client went away.

A body over its route's limit is refused with 413 before a handler sees it: at once when Content-Length says
so, or as soon as a chunked body passes the limit. Routes that stream (uploads, file writes) get a large
limit; every other route reads its body into memory, so it gets a small one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import Request
from starlette.exceptions import HTTPException

from rock.sdk.types import ErrorBody

MAX_BODY = 1024**2
"""Bytes of a JSON request: far above any real command, far below what hurts a server."""
MAX_UPLOAD = 8 * 1024**3
"""Bytes of one upload or file write (streamed through, never held in memory)."""

Scope = dict[str, Any]
Message = dict[str, Any]


def streams(method: str, path: str) -> bool:
    """The routes whose bodies are passed on in pieces rather than parsed."""
    # ("POST", "images"): an image archive a worker loads (rock.worker.image_transfer).
    return (method, path.rsplit("/", 1)[-1]) in {("POST", "upload"), ("PUT", "files"), ("POST", "images")}


def too_large(limit: int) -> str:
    return (
        f"the request body is over this server's limit of at most {limit} bytes; send less "
        "(large files go through upload, in pieces)"
    )


class BodyLimit:
    def __init__(self, app: Any, max_body: int = MAX_BODY, max_upload: int = MAX_UPLOAD) -> None:
        self.app, self.max_body, self.max_upload = app, max_body, max_upload

    def limit(self, scope: Scope) -> int:
        return self.max_upload if streams(scope["method"], scope["path"]) else self.max_body

    async def __call__(
        self, scope: Scope, receive: Callable[[], Any], send: Callable[[Message], Any]
    ) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit(scope)
        length = dict(scope["headers"]).get(b"content-length", b"")
        if length.isdigit() and int(length) > limit:
            await _refuse(send, limit)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise HTTPException(413, too_large(limit))
            return message

        await self.app(scope, counted, send)


async def _refuse(send: Callable[[Message], Any], limit: int) -> None:
    body = ErrorBody(type="PayloadTooLarge", message=too_large(limit)).model_dump_json().encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


@contextlib.asynccontextmanager
async def client_watch(request: Request) -> AsyncIterator[asyncio.Event]:
    """An event set when the client of `request` (whose body was read) disconnects, for as long as the
    block runs: a handler that waits long (the admission queue) gives up for a client that is gone."""
    gone = asyncio.Event()

    async def watch() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass
        gone.set()

    task = asyncio.get_running_loop().create_task(watch())
    try:
        yield gone
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
