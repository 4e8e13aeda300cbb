"""Fixtures for the fleet's tests: real admins on free loopback ports, real Docker for `docker` tests."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator

import pytest

from rock.admin.config import AdminConfig
from rock.admin.store import sqlite_url
from rock.fleet import AdminThread, LocalFleet, free_port, short_tmp
from rock.local_postgres import LocalPostgres


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


@pytest.fixture(scope="session")
def local_postgres() -> Iterator[LocalPostgres]:
    """One PostgreSQL server (from the distribution's package) for the session; each test takes a database."""
    with LocalPostgres() as server:
        yield server


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path) -> str:
    """The admin's store, once in SQLite and once in a fresh database of a real PostgreSQL server."""
    if request.param == "sqlite":
        return sqlite_url(tmp_path / "admin.db")
    server = request.getfixturevalue("local_postgres")
    return server.create_database(f"t_{uuid.uuid4().hex[:12]}")


@pytest.fixture(scope="module")
def fleet() -> Iterator[LocalFleet]:
    """A module's fleet on real Docker: an admin and its local worker, started once the base images are
    built; leaving it stops both and removes its containers and state folder. (Modules that need another
    fleet define their own `fleet`.)"""
    from rock.images import ensure_base_images

    ensure_base_images()
    with LocalFleet() as started:
        yield started
