"""Running the worker's HTTP server (`rock worker serve`), alone or next to the admin in one event loop."""

from __future__ import annotations

import logging

import uvicorn

from rock.serving import bind, uvicorn_config
from rock.worker.app import create_worker_app
from rock.worker.config import WorkerConfig
from rock.worker.service import WorkerService


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
    logging.getLogger("rock.worker").info("worker %s listens on %s", worker.config.id, config.url(port))
    await server.serve(sockets=[sock])
