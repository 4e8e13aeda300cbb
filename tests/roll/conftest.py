"""Session-wide models and servers shared by every roll test: each is loaded or started once per session.

- `smollm2`: `builtin:smollm2-135m-instruct` (real 135M Llama, fp32, CPU), converted into the user model
  cache on first use (~25 s once, then ~1 s to load).
- `tiny_moe`: `builtin:tiny-qwen3-moe` (seeded random 6M-parameter Qwen3-MoE, SmolLM2 tokenizer).
- `smollm2_server`, `tiny_moe_server`: `roll serve` (TorchEngine + OpenAI-compatible app) on a free loopback
  port, as a base URL such as `http://127.0.0.1:PORT/v1`. `serve_on_loopback(engine, loaded)` starts another.

The models are shared: never change their weights in place. A test that updates weights loads its own copy
with `roll.models.load_model(...)` and builds its own engine.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from roll.engine.protocol import InferenceEngine
    from roll.models import LoadedModel

SERVER_START_TIMEOUT_S = 60


@pytest.fixture(scope="session")
def smollm2() -> LoadedModel:
    from roll.models import load_model

    return load_model("builtin:smollm2-135m-instruct")


@pytest.fixture(scope="session")
def tiny_moe() -> LoadedModel:
    from roll.models import load_model

    return load_model("builtin:tiny-qwen3-moe")


@contextmanager
def serve_on_loopback(engine: InferenceEngine, loaded: LoadedModel) -> Iterator[str]:
    """Serve `create_app(engine, loaded)` with uvicorn in a thread on a free loopback port; yield /v1 URL."""
    import uvicorn

    from roll.engine.server import create_app

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(engine, loaded), log_level="warning", lifespan="on", timeout_graceful_shutdown=5
        )
    )
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, daemon=True, name=f"roll-serve-{port}"
    )
    thread.start()
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the test server on port {port} did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


@pytest.fixture(scope="session")
def tiny_moe_server(tiny_moe: LoadedModel) -> Iterator[str]:
    from roll.engine.torch_engine import TorchEngine

    with serve_on_loopback(TorchEngine(tiny_moe), tiny_moe) as url:
        yield url


@pytest.fixture(scope="session")
def smollm2_server(smollm2: LoadedModel) -> Iterator[str]:
    from roll.engine.torch_engine import TorchEngine

    with serve_on_loopback(TorchEngine(smollm2), smollm2) as url:
        yield url
