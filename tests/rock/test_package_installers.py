"""uv's install script under `packages` egress: `curl -LsSf https://astral.sh/uv/install.sh | sh` through the
forwarder installs uv from the package cache (the seeded one, offline), and nothing else is answered over
HTTPS. Real curl, devpi and the worker's forwarder; the only network is loopback and a unix socket."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from rock.packages.cache import PackageCache, default_folder
from rock.worker.installers import CA_FILE, script_version
from rock.worker.packages import PYPI_SOCKET
from tests.rock.test_package_cache_integrity import Bridges


class Relay:
    """127.0.0.1:<port> carried to a unix socket: what the rocklet's forwarder is inside a sandbox."""

    def __init__(self, target: Path) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX)
            upstream.connect(str(self.target))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(1 << 16):
                sink.sendall(data)
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def close(self) -> None:
        self.listener.close()


@pytest.fixture(scope="module")
def forwarder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Bridges, Relay]]:
    if not (default_folder() / "pypi").is_dir():
        pytest.fail(
            f"no package cache in {default_folder()}: run `rock packages seed` (scripts/setup.sh does)"
        )
    with PackageCache(default_folder(), offline=True) as cache:
        bridges = Bridges(cache.pypi, None, state_dir=tmp_path_factory.mktemp("uv-binaries"))
        relay = Relay(bridges.folder / PYPI_SOCKET)
        try:
            yield bridges, relay
        finally:
            relay.close()
            bridges.close()


def curl(
    relay: Relay, bridges: Bridges, *args: str, home: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """curl as the sandbox runs it: the forwarder as its https proxy, the installer CA as its trust."""
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home or bridges.folder),
        "https_proxy": f"http://127.0.0.1:{relay.port}",
        "CURL_CA_BUNDLE": str(bridges.folder / CA_FILE),
    }
    return subprocess.run(["curl", *args], env=env, capture_output=True, text=True, timeout=300)


def test_the_installer_paths_people_use_are_recognized():
    assert script_version("/uv/install.sh") == (True, None)
    assert script_version("/uv/0.7.13/install.sh") == (True, "0.7.13")
    assert script_version("/astral-sh/uv/releases/download/0.7.13/uv-installer.sh") == (True, "0.7.13")
    assert script_version("/uv/install.sh/../../etc/passwd") == (False, None)


def test_curl_pipe_sh_installs_uv_from_the_cache(forwarder: tuple[Bridges, Relay], tmp_path: Path):
    bridges, relay = forwarder
    script = curl(relay, bridges, "-LsSf", "https://astral.sh/uv/install.sh", home=tmp_path)
    assert script.returncode == 0, script.stderr
    assert "from the fleet's package cache" in script.stdout
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "https_proxy": f"http://127.0.0.1:{relay.port}",
        "CURL_CA_BUNDLE": str(bridges.folder / CA_FILE),
    }
    installed = subprocess.run(
        ["sh", "-c", 'sh -s && . "$HOME/.local/bin/env" && command -v uv && uv --version && uvx --version'],
        input=script.stdout,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert f"{tmp_path}/.local/bin/uv" in installed.stdout and "uv " in installed.stdout


def test_no_other_https_is_answered(forwarder: tuple[Bridges, Relay]):
    bridges, relay = forwarder
    elsewhere = curl(relay, bridges, "-sSf", "https://example.com/")
    assert elsewhere.returncode != 0 and "403" in elsewhere.stderr
    other_path = curl(relay, bridges, "-sSf", "https://astral.sh/secret")
    assert other_path.returncode == 22 and "404" in other_path.stderr
    missing = curl(relay, bridges, "-sSf", "https://astral.sh/uv/0.0.1/install.sh")
    assert missing.returncode == 22 and "503" in missing.stderr
    # The CA vouches only for what the forwarder answers: without it, curl refuses the certificate.
    untrusted = subprocess.run(
        ["curl", "-sSf", "https://astral.sh/uv/install.sh"],
        env={"PATH": os.environ["PATH"], "https_proxy": f"http://127.0.0.1:{relay.port}"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert untrusted.returncode == 60
