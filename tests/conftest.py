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
    rome-bench tests that only run trials on it: each start costs 7-14 s on 2 cores. Tests that need a fleet
    set up otherwise start their own."""
    from rome.bench.runner import sandbox_provider

    with sandbox_provider("rock", packages="offline") as opened:
        yield opened
