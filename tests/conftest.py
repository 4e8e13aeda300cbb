"""Session-wide fixtures shared by every package's tests."""

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from rome.terminal_tasks.sandbox import SandboxProvider

# Before any test imports torch: OpenMP's busy-waiting threads starve each other on a small shared machine.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# Private fleets serve the seeded package cache offline in tests: nothing leaves the machine, and fleets
# side by side never wait for one online writer (users get online by default: rock.packages.mode).
os.environ.setdefault("ALE_PACKAGES", "offline")


@pytest.fixture(scope="session")
def ray_session() -> Iterator[None]:
    """One local Ray instance for the whole test session (starting Ray costs seconds)."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="session")
def rock_provider() -> Iterator["SandboxProvider"]:
    """One private ROCK fleet (admin, local worker and the seeded package cache, offline) for the session's
    tests that only run sandboxes on it: each start costs 7-18 s on 2 cores, most of it devpi's. Tests that
    need a fleet set up otherwise start their own."""
    from rome.bench.runner import sandbox_provider

    with sandbox_provider("rock", packages="offline") as opened:
        yield opened


@pytest.fixture(scope="session")
def packages_fleet_url(rock_provider: "SandboxProvider") -> str:
    """The admin URL of `rock_provider`'s fleet, for tests that make their own sandboxes there."""
    from rome.terminal_tasks.rock_sandbox import RockProvider

    assert isinstance(rock_provider, RockProvider) and rock_provider.admin_url is not None
    return rock_provider.admin_url
