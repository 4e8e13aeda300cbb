"""Files holding secrets or every tenant's records are owner-only from their creation (issue 26 item 10)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from rock.admin.store import SandboxStore, sqlite_url
from rock.packages.cache import PackageCache


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask():
    """umask 0: a file's mode is then exactly what its creator asked for."""
    previous = os.umask(0)
    yield
    os.umask(previous)


def test_admin_db_is_owner_only(tmp_path: Path, open_umask: None):
    store = SandboxStore(sqlite_url(tmp_path / "admin.db"))
    store.close()
    assert _mode(tmp_path / "admin.db") == 0o600


def test_an_existing_world_readable_admin_db_is_made_owner_only(tmp_path: Path):
    path = tmp_path / "admin.db"
    SandboxStore(sqlite_url(path)).close()
    path.chmod(0o644)
    SandboxStore(sqlite_url(path)).close()
    assert _mode(path) == 0o600


def test_devpi_secret_is_created_owner_only(
    tmp_path: Path, open_umask: None, monkeypatch: pytest.MonkeyPatch
):
    """The mode must come from the open() that creates it: a chmod afterwards leaves the secret readable by
    anyone in between. With chmod calls made inert, only a file created 0600 stays 0600."""
    monkeypatch.setattr(Path, "chmod", lambda self, mode: None)
    data = tmp_path / "data"
    data.mkdir()
    secret = PackageCache._secret(PackageCache.__new__(PackageCache), data)
    assert _mode(secret) == 0o600
    first = secret.read_text()
    assert len(first) == 64
    assert PackageCache._secret(PackageCache.__new__(PackageCache), data).read_text() == first
