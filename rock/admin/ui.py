"""The fleet page: `GET /ui` on the admin, read-only.

The page itself is a static shell with no data in it; everything it shows comes from `GET /ui/api/...`,
which take the same API key as the rest of the API (the page sends the key the user typed, kept in the
tab's sessionStorage, as `Authorization: Bearer KEY`), and show a caller only what the API would: the
workers, the caller's own sandboxes (all of them for the admin's local caller), the admission queue (its
length, and the caller's own waiting creates), and a sandbox's recent commands.

Recent commands are kept by a small ASGI middleware in memory, the last COMMANDS_KEPT per sandbox: the
command's text (cut at COMMAND_CHARS), when it ran, how long it took and the HTTP status it got.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Awaitable, Callable, MutableMapping
from datetime import UTC, datetime
from functools import cache
from importlib.resources import files
from typing import Any

from fastapi import APIRouter, Depends, FastAPI
from fastapi.responses import HTMLResponse

from rock.admin import responses as R
from rock.admin.auth import LOCAL
from rock.admin.config import KeyPolicy
from rock.admin.service import Admin

COMMANDS_KEPT = 20
COMMAND_CHARS = 500
COMMAND_ROUTE = ("/v1/sandboxes/", ("/run", "/exec"))
BODY_LIMIT = 64 * 1024
NOT_THE_CALLERS = (401, 403, 404)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class CommandLog:
    """The last commands run in each sandbox, newest last."""

    def __init__(self, kept: int = COMMANDS_KEPT) -> None:
        self._kept = kept
        self._by_sandbox: dict[str, deque[dict[str, Any]]] = {}

    def record(self, sandbox_id: str, entry: dict[str, Any]) -> None:
        self._by_sandbox.setdefault(sandbox_id, deque(maxlen=self._kept)).append(entry)

    def recent(self, sandbox_id: str) -> list[dict[str, Any]]:
        return list(self._by_sandbox.get(sandbox_id, ()))


def _command_of(op: str, body: bytes) -> str:
    try:
        cmd = json.loads(body).get("cmd")
    except (ValueError, AttributeError):
        return "(unreadable request)"
    text = " ".join(cmd) if isinstance(cmd, list) else str(cmd)
    return text if len(text) <= COMMAND_CHARS else text[:COMMAND_CHARS] + " ..."


class CommandRecorder:
    """ASGI middleware: notes each POST /v1/sandboxes/{id}/run|exec in the CommandLog as it passes."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], log: CommandLog) -> None:
        self.app, self.log = app, log

    def _sandbox_op(self, scope: Scope) -> tuple[str, str] | None:
        path: str = scope.get("path", "")
        prefix, ops = COMMAND_ROUTE
        if scope.get("type") != "http" or scope.get("method") != "POST" or not path.startswith(prefix):
            return None
        rest = path[len(prefix) :]
        for op in ops:
            if rest.endswith(op) and "/" not in rest[: -len(op)]:
                return rest[: -len(op)], op[1:]
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        matched = self._sandbox_op(scope)
        if matched is None:
            await self.app(scope, receive, send)
            return
        sandbox_id, op = matched
        body = bytearray()
        status = [0]
        started = time.monotonic()

        async def receive_and_keep() -> Message:
            message = await receive()
            if message.get("type") == "http.request" and len(body) < BODY_LIMIT:
                body.extend(message.get("body", b"")[: BODY_LIMIT - len(body)])
            return message

        async def send_and_note(message: Message) -> None:
            if message.get("type") == "http.response.start":
                status[0] = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive_and_keep, send_and_note)
        finally:
            # A caller the API turned away (no key, or not the sandbox's owner) leaves nothing in its log.
            if status[0] not in NOT_THE_CALLERS:
                self.log.record(
                    sandbox_id,
                    {
                        "at": datetime.now(UTC).isoformat(timespec="seconds"),
                        "op": op,
                        "command": _command_of(op, bytes(body)),
                        "status": status[0],
                        "seconds": round(time.monotonic() - started, 3),
                    },
                )


@cache
def page_html() -> str:
    """The page (ui_page.html beside this module): markup, style and script, no data."""
    return files("rock.admin").joinpath("ui_page.html").read_text(encoding="utf-8")


def _age(since: datetime | None) -> float | None:
    return None if since is None else (datetime.now(UTC) - since).total_seconds()


def fleet_router(admin: Admin, log: CommandLog, identify: Callable[..., Awaitable[KeyPolicy]]) -> APIRouter:
    """The page and its read-only data routes; `identify` is the API's own authentication dependency."""
    router = APIRouter()

    @router.get("/ui", include_in_schema=False)
    async def page() -> HTMLResponse:
        return HTMLResponse(page_html(), headers={"Cache-Control": "no-store"})

    @router.get("/ui/api/auth")
    async def auth() -> dict[str, bool]:
        """Whether the page must ask for a key before it asks for data (says nothing else)."""
        return {"key_required": admin.auth.required}

    @router.get("/ui/api/fleet", responses=R.errors())
    async def fleet(who: KeyPolicy = Depends(identify)) -> dict[str, Any]:
        workers = []
        for worker in admin.scheduler.workers.values():
            used = admin.scheduler.used(worker.id)
            workers.append(
                {
                    "id": worker.id,
                    "url": worker.url,
                    "cpus": worker.capacity.cpus,
                    "memory": worker.capacity.memory,
                    "slots": worker.capacity.slots,
                    "used_cpus": used.cpus,
                    "used_memory": used.memory,
                    "used_slots": used.slots,
                    "reachable": worker.id not in admin.scheduler.unreachable,
                    "heard_s_ago": round(time.monotonic() - worker.last_heard, 1),
                }
            )
        sandboxes = [
            {
                "id": info.id,
                "state": info.state.value,
                "image": info.spec.image,
                "owner": info.owner,
                "worker": info.worker_id,
                "age_s": _age(info.created_at),
                "cpus": info.spec.cpus,
                "memory": info.spec.memory,
                "detail": info.detail,
            }
            for info in await admin.list(who)
        ]
        queue = admin.scheduler.queue()
        return {
            "caller": who.name,
            "workers": workers,
            "sandboxes": sandboxes,
            "queue_length": len(queue),
            "queue": [
                {
                    "position": position,
                    "sandbox": sandbox_id,
                    "owner": owner,
                    "cpus": d.cpus,
                    "memory": d.memory,
                }
                for position, (sandbox_id, owner, d) in enumerate(queue, start=1)
                if who is LOCAL or owner == who.name
            ],
        }

    @router.get("/ui/api/sandboxes/{sandbox_id}/commands", responses=R.errors(*R.SANDBOX))
    async def commands(sandbox_id: str, who: KeyPolicy = Depends(identify)) -> list[dict[str, Any]]:
        await admin.get(sandbox_id, who)  # 404 unless the caller may see it, as GET /v1/sandboxes/{id}
        return log.recent(sandbox_id)

    return router


def install_fleet_page(app: FastAPI, admin: Admin, identify: Callable[..., Awaitable[KeyPolicy]]) -> None:
    """Serve /ui and its data routes on `app`, and start keeping each sandbox's recent commands."""
    log = CommandLog()
    app.state.command_log = log
    app.include_router(fleet_router(admin, log, identify))
    app.add_middleware(CommandRecorder, log=log)
