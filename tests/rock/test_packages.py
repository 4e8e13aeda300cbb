"""The `packages` network policy on real Docker: pip, uv and apt reach the fleet's package cache (run for
real: devpi-server and apt-cacher, offline, seeded by `rock packages seed`) and nothing else is reachable."""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator

import pytest

from rock.packages.cache import default_folder
from rock.sdk.sandbox import Sandbox

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture
def fleet_url(packages_fleet_url: str) -> str:
    """The session's fleet with the package cache, offline (tests/conftest.py)."""
    if not (default_folder() / "pypi").is_dir():
        pytest.fail(
            f"no package cache in {default_folder()}: run `rock packages seed` (scripts/setup.sh does)"
        )
    return packages_fleet_url


@pytest.fixture
def own_server() -> Iterator[int]:
    """An HTTP server this test owns, on the host: every interface, so loopback and docker0 both have it."""
    server = http.server.ThreadingHTTPServer(("0.0.0.0", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield int(server.server_address[1])
    server.shutdown()


def _host_addresses() -> list[str]:
    """This host's addresses a sandbox might try: its docker0 gateway and its own outward address."""
    addresses = ["172.17.0.1"]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("10.255.255.255", 1))  # no packet is sent: this only picks the outward interface
        addresses.append(probe.getsockname()[0])
    return addresses


PROBE = """
import socket, sys
for host in sys.argv[2:]:
    try:
        socket.create_connection((host, int(sys.argv[1])), timeout=3).close()
        print("REACHED", host)
    except OSError as exc:
        print("BLOCKED", host, exc)
"""


def test_pip_and_uv_use_the_cache_and_nothing_else_is_reachable(fleet_url, own_server) -> None:
    with Sandbox(image="python:3.11-slim", network="packages", user="root", admin_url=fleet_url) as box:
        seeded = box.exec(["bash", "-c", "pip download --no-deps -d /tmp/w six && ls /tmp/w"], timeout=180)
        assert seeded.exit_code == 0 and "six-" in seeded.output, seeded.output
        # The cache is offline: what it was not seeded with cannot be had, however it is asked for.
        missing = box.exec(
            ["bash", "-c", "pip download --no-deps -d /tmp/w left-pad-not-seeded"], timeout=180
        )
        assert missing.exit_code != 0
        box.write_file("/tmp/probe.py", PROBE)
        targets = ["127.0.0.1", *_host_addresses()]
        probe = box.exec(["python3", "/tmp/probe.py", str(own_server), *targets], timeout=60)
        assert probe.output.count("BLOCKED") == len(targets) and "REACHED" not in probe.output, probe.output
        index = box.exec(["bash", "-c", 'echo "$PIP_INDEX_URL $UV_DEFAULT_INDEX"'], timeout=30).output
        assert index.split() == ["http://127.0.0.1:3141/root/pypi/+simple/"] * 2


def test_apt_installs_through_the_cache(fleet_url) -> None:
    if not (default_folder() / "apt").is_dir():
        pytest.fail("the package cache has no apt part: install apt-cacher and run `rock packages seed`")
    with Sandbox(image="debian:bookworm", network="packages", user="root", admin_url=fleet_url) as box:
        run = box.exec(
            [
                "bash",
                "-c",
                "apt-get update -q && apt-get install -y -q --no-install-recommends curl "
                "&& curl --version | head -1",
            ],
            timeout=300,
        )
        assert run.exit_code == 0 and run.output.splitlines()[-1].startswith("curl 7."), run.output[-2000:]


def test_none_has_no_cache(fleet_url) -> None:
    with Sandbox(image="python:3.11-slim", network="none", user="root", admin_url=fleet_url) as box:
        # No retries: with no route at all pip's five retries only wait out their backoff before failing.
        run = box.exec(["bash", "-c", "pip download --no-deps --retries 0 -d /tmp/w six"], timeout=120)
        assert run.exit_code != 0 and "PIP_INDEX_URL" not in box.exec(["env"], timeout=30).output


def test_the_uv_installer_pattern_works_from_the_cache(fleet_url) -> None:
    """Terminal-Bench's `curl -LsSf https://astral.sh/uv/install.sh | sh`, then uvx, with packages egress
    only: uv comes from the cache (rock.worker.installers), its packages too, and other HTTPS stays shut."""
    script = (
        "apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends curl >/dev/null "
        "&& curl -LsSf https://astral.sh/uv/install.sh | sh "
        '&& . "$HOME/.local/bin/env" && uvx --from pytest pytest --version '
        "&& { curl -sSf https://pypi.org/simple/ >/dev/null && echo OPEN || echo SHUT; }"
    )
    with Sandbox(image="python:3.11-slim", network="packages", user="root", admin_url=fleet_url) as box:
        run = box.exec(["bash", "-c", script], timeout=600)
    assert run.exit_code == 0, run.output[-3000:]
    assert "from the package cache" in run.output and "pytest " in run.output, run.output[-3000:]
    assert run.output.strip().splitlines()[-1] == "SHUT", run.output[-3000:]
