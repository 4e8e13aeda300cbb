"""Fixtures for the fleet's tests: real admins on free loopback ports, real Docker for `docker` tests."""

from __future__ import annotations

import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from rock.admin.app import create_app
from rock.admin.config import AdminConfig
from rock.admin.service import Admin


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def short_tmp(prefix: str) -> Path:
    """A folder with a short path: unix socket paths under it must stay below 108 bytes."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


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


@pytest.fixture
def admin_factory() -> Iterator:
    started: list[AdminThread] = []

    def start(**overrides: object) -> AdminThread:
        host = str(overrides.pop("host", "127.0.0.1"))
        config = AdminConfig(host=host, port=free_port(host), state_dir=short_tmp("rock-admin-"), **overrides)
        admin = AdminThread(config).__enter__()
        started.append(admin)
        return admin

    yield start
    for admin in started:
        admin.__exit__()
