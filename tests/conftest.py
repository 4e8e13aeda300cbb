"""Session-wide fixtures shared by every package's tests."""

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def ray_session() -> Iterator[None]:
    """One local Ray instance for the whole test session (starting Ray costs seconds)."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
    yield
    ray.shutdown()
