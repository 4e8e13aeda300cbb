"""The policy's inference engine in this process: `TorchEngine` behind `roll serve`'s app
(`roll.engine.server.create_app`) on a loopback port, its event loop in a thread of its own.

Keeping the engine in-process lets the training loop hand it new weights directly (`update_weights` runs the
engine's own coroutine on the server's loop), while the proxy and the agent reach it over HTTP as usual.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    import torch

    from roll.engine.protocol import InferenceEngine
    from roll.models import LoadedModel

START_TIMEOUT_S = 120.0
UPDATE_TIMEOUT_S = 600.0


class EngineServer:
    """`with EngineServer(loaded) as server:` serves `loaded` at `server.url` (`http://127.0.0.1:PORT/v1`),
    through a `TorchEngine`, or through `engine` when given (the tests' scripted engine)."""

    def __init__(self, loaded: LoadedModel, engine: InferenceEngine | None = None) -> None:
        import uvicorn

        from roll.engine.server import create_app
        from roll.engine.torch_engine import TorchEngine

        self.engine = engine if engine is not None else TorchEngine(loaded)
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/v1"
        config = uvicorn.Config(
            create_app(self.engine, loaded), log_level="warning", timeout_graceful_shutdown=5
        )
        self._server = uvicorn.Server(config)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, daemon=True, name="agentic-engine")

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._server.serve(sockets=[self._sock]))

    def __enter__(self) -> EngineServer:
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self._sock.close()
                raise RuntimeError(
                    f"the engine server on {self.url} did not start within {START_TIMEOUT_S:g} s; "
                    "see the log above for the cause"
                )
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=60)
        self._sock.close()
        if not self._thread.is_alive():
            self._loop.close()

    def update_weights(self, weights: Mapping[str, torch.Tensor], version: int) -> None:
        """Load `weights` into the serving engine as `version` (between two decode steps)."""
        future = asyncio.run_coroutine_threadsafe(self.engine.update_weights(weights, version), self._loop)
        future.result(timeout=UPDATE_TIMEOUT_S)

    def health(self) -> dict[str, Any]:
        """The server's own `/health` answer (status, model, weight_version, ...)."""
        base = self.url.removesuffix("/v1")
        response = httpx.get(f"{base}/health", timeout=30)
        response.raise_for_status()
        return dict(response.json())
