"""An admin served in a thread, for API tests that need no Docker."""

from __future__ import annotations

import threading
import time

import httpx
import uvicorn

from rock.admin.app import create_app
from rock.admin.config import AdminConfig
from rock.admin.service import Admin


class AdminThread:
    """An admin (without a local worker) served by uvicorn in a thread, for tests that need no Docker."""

    def __init__(self, config: AdminConfig) -> None:
        self.config = config
        self.url = f"http://{config.host}:{config.port}"
        self.server = uvicorn.Server(
            uvicorn.Config(create_app(Admin(config)), host=config.host, port=config.port, log_level="warning")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> AdminThread:
        self.thread.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/health", timeout=1).is_success:
                    return self
            except httpx.HTTPError:
                time.sleep(0.05)
        raise RuntimeError(f"the admin at {self.url} did not start")

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)
