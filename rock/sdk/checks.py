"""Checks on what callers send, shared by the wire types: sizes, bounded numbers, text, image references.

Every bound here exists because something below it breaks past it: Docker ignores a memory limit of 0 and a
CPU quota under 1 ms per 100 ms, select() and poll() overflow past ~24 days, and a NUL byte cannot cross
into argv, the environment or a path.
"""

from __future__ import annotations

import re
from typing import Annotated

from docker_image import reference
from pydantic import AfterValidator, Field

KIB = 1024
MIB = 1024**2
MIN_MEMORY = 6 * MIB
"""Docker's smallest memory limit; below it (0 included) a container would run without any."""
MAX_MEMORY = 1024**4
MIN_DISK = 16 * MIB
"""Below this a sandbox could not even start its shell's state files; 0 would mean no limit at all."""
MAX_DISK = 64 * 1024**4
MIN_CPUS = 0.01
"""Docker's smallest CPU quota (1 ms per 100 ms period); `int(cpus * period)` of less is 0: no quota."""
MAX_CPUS = 1024.0
MAX_COMMAND_TIMEOUT = 24 * 3600.0
"""Seconds one command may run (the rocklet's waits overflow beyond ~24 days)."""
MAX_LIFETIME = 30 * 24 * 3600.0
"""Seconds a sandbox's ttl or idle timeout may be."""
MAX_START_TIMEOUT = 3600.0
MAX_QUEUE_TIMEOUT = 600.0
"""Seconds a create may wait for room; longer, the caller should retry instead of holding a connection."""
MAX_PATH = 4096
MAX_ID = 64
MAX_UID = 2**32 - 2

_MEMORY = re.compile(r"^\s*(\d{1,18}(?:\.\d{1,9})?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": KIB, "m": MIB, "g": 1024**3, "t": 1024**4}


def parse_memory(value: str | int) -> int:
    """Bytes from `536870912`, `"512m"`, `"2g"`, `"1.5GiB"` (a fraction of a byte is dropped)."""
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"memory must not be negative, got {value}")
        return value
    match = _MEMORY.match(value)
    if not match:
        raise ValueError(
            f"memory {value[:40]!r} is not a size; write it like '512m' or '2g' (at most 18 digits)"
        )
    whole, _, fraction = match.group(1).partition(".")
    unit = _UNITS[match.group(2).lower()]
    return int(whole) * unit + int(fraction or "0") * unit // 10 ** len(fraction)


def sandbox_memory(value: str) -> str:
    """A sandbox's memory limit: a size from MIN_MEMORY (Docker's floor) to MAX_MEMORY."""
    size = parse_memory(value)
    if size < MIN_MEMORY:
        raise ValueError(
            f"memory {value!r} is {size} bytes, below the smallest limit Docker enforces (6m); "
            "ask for 6m or more"
        )
    if size > MAX_MEMORY:
        raise ValueError(f"memory {value!r} is over 1t; ask for less")
    return value


def sandbox_disk(value: str) -> str:
    """A sandbox's disk limit: a size from MIN_DISK to MAX_DISK."""
    size = parse_memory(value)
    if size < MIN_DISK:
        raise ValueError(f"disk {value!r} is {size} bytes, below the smallest limit (16m); ask for more")
    if size > MAX_DISK:
        raise ValueError(f"disk {value!r} is over 64t; ask for less")
    return value


def no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("contains a NUL byte, which cannot reach a command, its environment or a path")
    return value


def env_name(value: str) -> str:
    no_nul(value)
    if not value or "=" in value:
        raise ValueError(f"environment variable name {value[:40]!r} must be non-empty and without '='")
    return value


def image_reference(value: str) -> str:
    """An image name as Docker's distribution reference grammar defines it (`name[:tag][@digest]`)."""
    try:
        reference.Reference.parse(value)
    except reference.InvalidReference as exc:
        raise ValueError(
            f"image {value[:80]!r} is not an image reference ({exc}); write it like 'python:3.11', "
            "'ale/debian:bookworm' or 'registry.example:5000/team/app@sha256:<64 hex>'"
        ) from None
    repository = _repository_path(value)
    if repository != repository.lower():  # Docker's own 400 for this would surface only at start
        raise ValueError(
            f"image {value[:80]!r}: the repository name must be lowercase ({repository!r}); "
            f"write {repository.lower()!r}"
        )
    return value


def _repository_path(reference_text: str) -> str:
    """The repository path of a valid reference (no tag, digest or registry host). As Docker reads it, the
    first component is a host (which may hold capitals) only with a `.` or `:` in it, or as `localhost`."""
    path = reference_text.partition("@")[0]
    if path.rfind(":") > path.rfind("/"):
        path = path[: path.rfind(":")]
    first, _, rest = path.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return rest
    return path


Text = Annotated[str, AfterValidator(no_nul)]
"""Free text that travels into a command, an environment or a path: anything but NUL."""
SandboxPath = Annotated[str, Field(min_length=1, max_length=MAX_PATH), AfterValidator(no_nul)]
"""A path inside the sandbox."""
EnvName = Annotated[str, Field(max_length=MAX_PATH), AfterValidator(env_name)]
Env = dict[EnvName, Text]
Name = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[^/\x00]+$")]
"""A session name: it travels in a URL path, so no '/'."""
CommandSeconds = Annotated[float, Field(gt=0, le=MAX_COMMAND_TIMEOUT, allow_inf_nan=False)]
