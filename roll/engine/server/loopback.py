"""An ASGI app (`roll serve`'s, the model proxy's) on a free loopback port, served in a thread of its own."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from roll.engine.protocol import InferenceEngine
    from roll.engine.server.state import ServedModel

START_TIMEOUT_S = 60.0


class LoopbackServer:
    """An ASGI app served by uvicorn in a daemon thread on a free loopback port (started on construction;
    `url` is its base URL), until `close()` or the end of a `with` block."""

    def __init__(self, app: Any, name: str) -> None:
        import uvicorn

        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=5))
        self._thread = threading.Thread(target=self._serve, daemon=True, name=name)
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the {name} server on {self.url} did not start; see the log above")
            time.sleep(0.02)

    def _serve(self) -> None:
        asyncio.run(self._server.serve(sockets=[self._sock]))

    def __enter__(self) -> LoopbackServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)
        self._sock.close()


@contextmanager
def serve_on_loopback(engine: InferenceEngine, model: ServedModel) -> Iterator[str]:
    """`roll serve`'s app over `engine` on a free loopback port; yields its OpenAI base URL
    (`http://127.0.0.1:PORT/v1`). The app starts the engine and shuts it down at the end."""
    from roll.engine.server import create_app

    with LoopbackServer(create_app(engine, model), "roll-serve") as server:
        yield f"{server.url}/v1"
