"""Fixtures for the fleet's tests: real admins on free loopback ports, real Docker for `docker` tests."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from rock.admin.config import AdminConfig
from rock.fleet import AdminThread, free_port, short_tmp


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
        shutil.rmtree(admin.config.state_dir, ignore_errors=True)
