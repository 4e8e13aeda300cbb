"""Running the admin (`rock admin serve`): its HTTP server with the env routes (`/envs/...`), unless told not
to one local worker, and the ModelProxyService when a proxy mode is configured."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
from typing import TYPE_CHECKING

import uvicorn
from pydantic import SecretStr

from rock.admin.app import create_app
from rock.admin.config import AdminConfig
from rock.admin.service import Admin
from rock.sdk.errors import CapacityExceeded
from rock.serving import QuietSignalsServer, bind, uvicorn_config
from rock.worker.app import create_worker_app
from rock.worker.lifetime import Owner, watch_owner
from rock.worker.service import WorkerService

if TYPE_CHECKING:
    from rock.proxy.types import ProxyConfig

log = logging.getLogger("rock.admin")


async def _stop_this_process() -> None:
    os.kill(os.getpid(), signal.SIGTERM)


class AdminServer(uvicorn.Server):
    """Answers the creates still waiting for room as soon as shutdown begins (429, retry), so a restart
    never leaves them hanging until the connection drops; nothing was created for them."""

    def __init__(self, config: uvicorn.Config, admin: Admin) -> None:
        super().__init__(config)
        self.admin = admin

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.admin.scheduler.refuse_waiters(
            CapacityExceeded(
                "the admin stopped (a restart, say) while this create waited for room; nothing was created: "
                "create it again in a few seconds",
                retry_after=5.0,
            )
        )
        await super().shutdown(sockets)


async def serve_admin(
    config: AdminConfig, log_level: str = "warning", proxy: ProxyConfig | None = None, proxy_port: int = 8090
) -> None:
    """Serve until stopped. `proxy`: run the ModelProxyService on 127.0.0.1:`proxy_port` in this process, so
    it can listen on the local worker's sandbox sockets (same host); loopback only, as it has no API keys."""
    admin = Admin(config)
    admin_sock = bind(config.host, config.port)
    admin_port = admin_sock.getsockname()[1]
    admin_host = "127.0.0.1" if config.host in ("0.0.0.0", "::") else config.host
    app = create_app(admin, envs_admin_url=f"http://{admin_host}:{admin_port}")
    server = AdminServer(uvicorn_config(app, log_level), admin)
    worker_server: uvicorn.Server | None = None
    worker_task: asyncio.Task[None] | None = None
    if config.local_worker is not None:
        worker_sock = bind("127.0.0.1", 0)
        worker_port = worker_sock.getsockname()[1]
        worker_config = config.local_worker.model_copy(
            update={
                "admin_url": f"http://{admin_host}:{admin_port}",
                "token": SecretStr(admin.auth.worker_token),
                "host": "127.0.0.1",
                "port": worker_port,
            }
        )
        worker = WorkerService(worker_config)
        worker_server = QuietSignalsServer(
            uvicorn_config(create_worker_app(worker, lambda: worker_port), log_level)
        )
        worker_task = asyncio.get_running_loop().create_task(worker_server.serve(sockets=[worker_sock]))
    owner = Owner.from_env()
    watch: asyncio.Task[None] | None = None
    if owner is not None and config.local_worker is None:  # a local worker watches it, and stops this process
        watch = asyncio.get_running_loop().create_task(watch_owner(owner, _stop_this_process))
    log.info("admin listens on http://%s:%d (environments under /envs)", config.host, admin_port)
    with contextlib.ExitStack() as stack:
        if proxy is not None:
            from rock.proxy.server import ProxyThread

            proxy_url = stack.enter_context(ProxyThread(proxy, "127.0.0.1", proxy_port)).url
            log.info("model proxy (%s mode) listens on %s", proxy.mode, proxy_url)
        else:
            log.info("model proxy not started (no --proxy-mode given, or --no-proxy)")
        try:
            await server.serve(sockets=[admin_sock])
        finally:
            if watch is not None:
                watch.cancel()
            if worker_server is not None and worker_task is not None:
                worker_server.should_exit = True
                await worker_task
