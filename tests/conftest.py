"""Session-wide fixtures shared by every package's tests."""

import os
from collections.abc import Iterator

import pytest

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
