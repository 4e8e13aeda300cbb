"""`ray.address=HOST:PORT` joins a cluster made by `ray start --head` with token authentication on.

A real head on loopback, in a temp dir and a temp HOME (its ~/.ray/auth_token), stopped by its own process
group; the driver is a fresh process, as `roll train` is.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
RAY = Path(sys.executable).with_name("ray")
JOIN = """
import ray
from roll.pipeline.cluster import init_ray
from roll.pipeline.config import TrainConfig
init_ray(TrainConfig.model_validate({"ray": {"address": "127.0.0.1:%d"}}))
print("joined", int(ray.cluster_resources()["CPU"]))
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    return env | {"HOME": str(home), "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0"}


@pytest.fixture
def token_head() -> Iterator[tuple[int, Path]]:
    # Short: Ray's unix sockets live under the temp dir, and socket paths are limited to 107 bytes.
    scratch = Path(tempfile.mkdtemp(prefix="rj-", dir="/tmp"))
    home = scratch / "home"
    (home / ".ray").mkdir(parents=True)
    (home / ".ray" / "auth_token").write_text(secrets.token_hex(32))
    port = _free_port()
    head = subprocess.Popen(
        [str(RAY), "start", "--head", "--block", f"--port={port}", "--node-ip-address=127.0.0.1",
         "--num-cpus=1", "--include-dashboard=false", f"--temp-dir={scratch / 'ray'}"],
        env=_env(home) | {"RAY_AUTH_MODE": "token"},
        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        yield port, home
    finally:
        os.killpg(head.pid, signal.SIGKILL)  # the head's GCS, raylet and monitor share its process group
        head.wait()
        shutil.rmtree(scratch, ignore_errors=True)


def test_explicit_address_presents_the_local_token(token_head: tuple[int, Path]) -> None:
    port, home = token_head
    done = subprocess.run(
        [sys.executable, "-c", JOIN % port], env=_env(home), capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0 and "joined 1" in done.stdout, (done.stdout + done.stderr)[-3000:]
