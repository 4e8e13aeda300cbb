"""Running the worker's HTTP server (`rock worker serve`), alone or next to the admin in one event loop."""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import Iterator

import uvicorn

from rock.worker.app import create_worker_app
from rock.worker.config import WorkerConfig
from rock.worker.service import WorkerService


def bind(host: str, port: int) -> socket.socket:
    """A listening socket (port 0 picks a free one), so the port is known before the server starts."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP: asyncio sets TCP_NODELAY on accepted sockets only when the proto says TCP; without
    # it every keep-alive response waits ~40 ms on Nagle + delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OSError(
            f"cannot listen on {host}:{port} ({exc.strerror}); pick another --port or stop the "
            "process holding it"
        ) from exc
    sock.listen(1024)
    sock.set_inheritable(True)
    return sock


class QuietSignalsServer(uvicorn.Server):
    """A uvicorn server that leaves SIGINT/SIGTERM to another server in the same process."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def uvicorn_config(app: object, log_level: str) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        log_level=log_level,
        lifespan="on",
        timeout_graceful_shutdown=5,  # type: ignore[arg-type]
        access_log=False,
    )


async def serve_worker(config: WorkerConfig, log_level: str = "warning") -> None:
    if config.token is None:
        raise ValueError(
            "a worker needs the fleet's worker credential: --token-file ADMIN_STATE_DIR/worker.token (the "
            "admin writes it there), or ROCK_WORKER_TOKEN"
        )
    if config.host in ("0.0.0.0", "::") and not config.advertise_url:
        raise ValueError(
            f"binding {config.host} needs --advertise-url: the URL the admin can reach this worker on"
        )
    sock = bind(config.host, config.port)
    port = sock.getsockname()[1]
    worker = WorkerService(config)
    server = uvicorn.Server(uvicorn_config(create_worker_app(worker, lambda: port), log_level))
    logging.getLogger("rock.worker").info("worker %s listens on %s", config.id, config.url(port))
    await server.serve(sockets=[sock])
