"""`--packages online|offline`: which cache a private fleet runs, and the one line when online falls back.
The registry probe goes to loopback listeners this test starts, never to the internet."""

from __future__ import annotations

import fcntl
import http.server
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rock.packages.mode import choose, default_mode, fleet_admin_args, registry_error


@pytest.fixture
def registry() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


def closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/"


def seeded(folder: Path) -> Path:
    (folder / "pypi").mkdir(parents=True)
    return folder


def test_the_probe_tells_a_reachable_registry_from_an_unreachable_one(registry: str):
    assert registry_error(registry, timeout_s=5) is None
    assert "ConnectError" in (registry_error(closed_port(), timeout_s=5) or "")


def test_online_runs_the_cache_online_when_the_registries_answer(tmp_path: Path, registry: str):
    lines: list[str] = []
    args = fleet_admin_args("online", seeded(tmp_path), lines.append, lambda: registry_error(registry))
    assert args == ["--package-cache", str(tmp_path)] and lines == []


def test_online_falls_back_to_the_seeded_cache_with_one_line(tmp_path: Path):
    lines: list[str] = []
    args = fleet_admin_args("online", seeded(tmp_path), lines.append, lambda: registry_error(closed_port()))
    assert args == ["--package-cache", str(tmp_path), "--package-cache-offline"]
    assert len(lines) == 1 and "cannot be reached" in lines[0] and "offline" in lines[0]


def test_offline_needs_a_seeded_cache_and_never_probes(tmp_path: Path):
    def probe() -> str | None:
        raise AssertionError("offline must not probe the registries")

    assert fleet_admin_args("offline", tmp_path, probe=probe) == []
    args = fleet_admin_args("offline", seeded(tmp_path), probe=probe)
    assert args == ["--package-cache", str(tmp_path), "--package-cache-offline"]


def test_online_without_a_seeded_cache_starts_an_empty_one(tmp_path: Path, registry: str):
    assert fleet_admin_args("online", tmp_path, probe=lambda: registry_error(registry)) == [
        "--package-cache",
        str(tmp_path),
    ]


def test_a_folder_served_online_elsewhere_is_read_offline(tmp_path: Path, registry: str):
    folder = seeded(tmp_path)
    with (folder / "online.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        choice = choose("online", folder, lambda: registry_error(registry))
    assert choice.offline and choice.fallback and "another fleet" in choice.fallback
    assert not choose("online", folder, lambda: registry_error(registry)).offline


def test_the_default_comes_from_ale_packages(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("ALE_PACKAGES", raising=False)
    assert default_mode() == "online"
    monkeypatch.setenv("ALE_PACKAGES", "offline")
    assert default_mode() == "offline"
    monkeypatch.setenv("ALE_PACKAGES", "sometimes")
    with pytest.raises(ValueError, match="online, offline"):
        default_mode()


def test_rome_bench_takes_packages_and_refuses_other_values(tmp_path: Path):
    from rome.bench.cli import app

    for command in ("terminal-pro", "validate", "check"):
        refused = CliRunner().invoke(app, [command, str(tmp_path), "--packages", "sometimes"])
        assert refused.exit_code == 2 and "online" in refused.output, refused.output
