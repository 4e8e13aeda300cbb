"""Fetching packages through the cache while it is online, so that it holds them afterwards."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any


def seed_pypi(index_url: str, requirements: list[str]) -> None:
    """`pip download` through the cache (only the cache: the machine's own pip settings are left out)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | {"PIP_CONFIG_FILE": os.devnull}
    with tempfile.TemporaryDirectory(prefix="rock-seed-") as scratch:
        # devpi fetches the whole project list from upstream on its first request: that can take minutes.
        args = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-cache-dir",
            "--timeout",
            "600",
            "--index-url",
            index_url,
        ]
        run = subprocess.run(
            [*args, "-d", scratch, *requirements], env=env, capture_output=True, text=True, timeout=1800
        )
    if run.returncode != 0:
        raise RuntimeError(f"pip could not fetch {requirements} through the cache:\n{run.stdout}{run.stderr}")


def seed_apt(proxy: str, packages: list[str], image: str) -> None:
    """`apt-get install --download-only` in a throwaway container of `image` whose apt uses the cache (the
    container shares the host's loopback to reach it): the cache then holds the lists and the .debs."""
    import docker

    script = (
        f"echo 'Acquire::http::Proxy \"http://{proxy}\";' > /etc/apt/apt.conf.d/00seed && "
        "apt-get update -q && "
        f"apt-get install -y -q --download-only --no-install-recommends {' '.join(packages)}"
    )
    client = docker.from_env()
    try:
        container = client.containers.run(
            image,
            ["sh", "-c", script],
            network_mode="host",
            detach=True,
            labels={"ale.component": "rock-seed"},
        )
        try:
            status = container.wait(timeout=1800)
            log = container.logs().decode(errors="replace")
        finally:
            container.remove(force=True)
    finally:
        client.close()
    if status.get("StatusCode") != 0:
        raise RuntimeError(f"apt could not fetch {packages} through the cache:\n{log[-3000:]}")


SEEDED = "seeded.json"
"""What the last complete seed of a cache folder fetched (written only once both halves succeeded)."""


def seeded_with(folder: Path) -> dict[str, Any] | None:
    """What `folder` was last seeded with, or None when it never was (or its PyPI half is gone)."""
    try:
        record = json.loads((folder / SEEDED).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and (folder / "pypi").is_dir() else None


def write_seeded(folder: Path, wanted: dict[str, Any]) -> None:
    (folder / SEEDED).write_text(json.dumps(wanted, indent=2) + "\n")
