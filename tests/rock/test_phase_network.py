"""A running sandbox's network narrowed to `none` for one phase and given back, in place (issue 27 item 3):
the package cache goes away and comes back for a `packages` sandbox, the bridge for a `bridge` one, and a
sandbox is never widened past what it was made with."""

from __future__ import annotations

import pytest

from rock.packages.cache import default_folder
from rock.sdk.errors import BadRequest
from rock.sdk.sandbox import Sandbox

pytestmark = [pytest.mark.docker, pytest.mark.slow]

PIP = "pip download --no-deps --no-cache-dir --retries 0 --timeout 5 -d /tmp/w six"


@pytest.fixture
def fleet_url(packages_fleet_url: str) -> str:
    """The session's fleet with the package cache, offline (tests/conftest.py)."""
    if not (default_folder() / "pypi").is_dir():
        pytest.fail(
            f"no package cache in {default_folder()}: run `rock packages seed` (scripts/setup.sh does)"
        )
    return packages_fleet_url


def pip_works(box: Sandbox) -> bool:
    return box.exec(["bash", "-c", f"rm -rf /tmp/w; {PIP}"], timeout=120).exit_code == 0


def test_a_packages_sandbox_loses_the_cache_and_gets_it_back(fleet_url) -> None:
    with Sandbox(image="python:3.11-slim", network="packages", user="root", admin_url=fleet_url) as box:
        assert pip_works(box)
        assert box.set_network("none") == "none"
        assert not pip_works(box)
        assert box.set_network("none") == "none"  # twice is fine
        assert box.set_network("packages") == "packages"
        assert pip_works(box)
        with pytest.raises(BadRequest, match="never widened to 'bridge'"):
            box.set_network("bridge")


def interfaces(box: Sandbox) -> list[str]:
    return sorted(box.exec(["ls", "/sys/class/net"], timeout=30).output.split())


def test_a_bridge_sandbox_is_taken_off_the_bridge_and_put_back(fleet_url) -> None:
    with Sandbox(image="python:3.11-slim", network="bridge", user="root", admin_url=fleet_url) as box:
        assert interfaces(box) == ["eth0", "lo"]
        box.set_network("none")
        assert interfaces(box) == ["lo"]
        box.set_network("bridge")
        back = interfaces(box)  # Docker names the new interface eth1
        assert len(back) == 2 and back[-1] == "lo" and back[0].startswith("eth")


def test_a_none_sandbox_cannot_be_given_a_network(fleet_url) -> None:
    box = Sandbox(image="python:3.11-slim", network="none", user="root", admin_url=fleet_url)
    with box, pytest.raises(BadRequest, match="made with network 'none'"):
        box.set_network("packages")
