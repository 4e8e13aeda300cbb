"""The admin's control listener: worker heartbeats and /health on a port, thread and event loop of their own,
so they never queue behind creates.

In a burst of creates the admin's event loop runs thousands of callbacks per turn and reads a socket only
between turns: a heartbeat on the main port waited up to 14.5 s (1,000 creates in flight, load 14), long
enough for a live worker to be declared lost. Here a heartbeat is read, checked and answered by another
thread. It is proof of life at once (the worker's `last_heartbeat`, one float written under the GIL); the
rest of it (registering a new worker, reconciling its sandbox list) is state of the main loop and runs
there, next in its queue. The answer waits for that up to PROMPT seconds; past them it goes without the
sandboxes to remove, which the worker's next beat brings.

Workers learn the listener's port from any heartbeat reply (`HeartbeatReply.heartbeat_port`) and send their
next beats there; `/health` there answers what the main port's does.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from rock.sdk.errors import BadRequest
from rock.serving import QuietSignalsServer, bind, install_error_handlers, uvicorn_config
from rock.worker.contract import HEARTBEAT_PATH, Heartbeat, HeartbeatReply

if TYPE_CHECKING:
    from rock.admin.service import Admin

PROMPT = 0.5
"""Seconds a heartbeat's answer waits for the main loop to reconcile it before it goes without removals."""


def health_of(admin: Admin) -> dict[str, object]:
    """What /health answers (on both listeners): plain reads, safe from any thread."""
    local = admin.config.local_worker
    return {
        "status": "ok",
        "workers": len(admin.scheduler.workers),
        "live": admin.live_count,
        "control_port": admin.control_port,
        "warm": {} if admin.pool is None else {image: len(ids) for image, ids in admin.pool.ready.items()},
        # Whether sandboxes may ask for network='packages' (the local worker has the package cache), and
        # its loopback addresses for builds on this host.
        "package_cache": bool(local is not None and local.pypi_cache),
        "pypi_cache": local.pypi_cache if local is not None else None,
        "apt_cache": local.apt_cache if local is not None else None,
    }


class ControlListener:
    def __init__(self, admin: Admin, host: str, port: int) -> None:
        self.admin = admin
        self.sock = bind(host, port)
        self.port: int = self.sock.getsockname()[1]
        self.main_loop: asyncio.AbstractEventLoop | None = None
        self.late = 0
        """Heartbeats answered before the main loop reconciled them (it was busy for PROMPT seconds)."""
        config = uvicorn_config(self._app(), "warning")
        config.lifespan = "off"
        self.server = QuietSignalsServer(config)
        self.thread = threading.Thread(target=self._serve, name="rock-admin-control", daemon=True)

    def start(self) -> None:
        self.main_loop = asyncio.get_running_loop()
        self.thread.start()

    async def stop(self) -> None:
        self.server.should_exit = True
        await asyncio.to_thread(self.thread.join, 10)

    def _serve(self) -> None:
        asyncio.run(self.server.serve(sockets=[self.sock]))

    async def _on_main_loop(self, beat: Heartbeat) -> HeartbeatReply:
        return self.admin.heartbeat(beat)

    def _app(self) -> Starlette:
        """Two plain Starlette routes: FastAPI's routing, dependency solving and parameter handling cost more
        than a heartbeat's own work, and this thread shares the GIL with the main loop's creates."""
        admin = self.admin

        async def health(_request: Request) -> Response:
            return JSONResponse(health_of(admin))

        async def heartbeat(request: Request) -> Response:
            admin.auth.check_worker(request.headers.get("authorization"))
            # pydantic parses the JSON itself: a beat lists every sandbox of its worker, and json.loads +
            # validation of the dict took ~3x as long (408 against 143 us for 200 sandboxes).
            try:
                beat = Heartbeat.model_validate_json(await request.body())
            except ValidationError as exc:
                first = exc.errors()[0]
                raise BadRequest(
                    f"invalid heartbeat: {first['msg']} at {first['loc']}; a worker of this admin's version "
                    "sends valid ones"
                ) from None
            reply = await self._answer(beat)
            return Response(reply.model_dump_json(), media_type="application/json")

        app = Starlette(
            routes=[
                Route("/health", health, methods=["GET"]),
                Route(HEARTBEAT_PATH, heartbeat, methods=["POST"]),
            ]
        )
        install_error_handlers(app)
        return app

    async def _answer(self, beat: Heartbeat) -> HeartbeatReply:
        """Proof of life now; the reconciliation on the main loop, waited for up to PROMPT seconds."""
        self.admin.note_alive(beat.worker_id)
        assert self.main_loop is not None
        reconciled = asyncio.wrap_future(
            asyncio.run_coroutine_threadsafe(self._on_main_loop(beat), self.main_loop)
        )
        reconciled.add_done_callback(lambda f: f.cancelled() or f.exception())  # marks its error seen
        # asyncio.wait, not wait_for: past PROMPT the reconciliation still runs, only unawaited.
        done, _ = await asyncio.wait({reconciled}, timeout=PROMPT)
        if done:
            return reconciled.result()
        self.late += 1
        return HeartbeatReply(remove=[], heartbeat_port=self.port)
