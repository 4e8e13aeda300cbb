"""`--packages online|offline`: how a private fleet runs the package cache set-up seeded.

online (the default): devpi and apt-cacher fetch what they lack from PyPI and the Debian mirrors (and keep
it), so a task can install any version. Sandboxes still only read through the forwarder (GET/HEAD, the
mirror index and the configured mirrors), so online mode writes nothing a sandbox chose into the cache.
offline: only what is seeded is served, from a copy, and nothing leaves the machine.

Online falls back to offline, with one line saying why, when the registries cannot be reached or another
fleet already serves the same cache folder online (one devpi writer per database). `$ALE_PACKAGES` sets
the default where no flag or config key does.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import httpx

PackagesMode = Literal["online", "offline"]
PACKAGES_MODES: tuple[PackagesMode, ...] = ("online", "offline")
PACKAGES_HELP = (
    "Package cache of the private fleet: online fetches what it lacks from PyPI/Debian (default; falls back "
    "to offline when they cannot be reached), offline serves only what `rock packages seed` cached."
)
MODE_ENV = "ALE_PACKAGES"
REGISTRY_PROBE = "https://pypi.org/simple/"
PROBE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class PackagesChoice:
    offline: bool
    fallback: str | None = None  # why online became offline, in one line


def default_mode() -> PackagesMode:
    """$ALE_PACKAGES when set (CI pins `offline` to stay off the network), else online."""
    value = os.environ.get(MODE_ENV, "online")
    if value not in PACKAGES_MODES:
        raise ValueError(f"{MODE_ENV}={value!r} is not one of {', '.join(PACKAGES_MODES)}")
    return value  # type: ignore[return-value]


def registry_error(url: str = REGISTRY_PROBE, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """None when `url` answers (any HTTP status below 500), else what went wrong."""
    try:
        status = httpx.head(url, timeout=timeout_s, follow_redirects=False).status_code
    except httpx.HTTPError as error:
        return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return None if status < 500 else f"HTTP {status}"


def online_taken(folder: Path) -> bool:
    """Whether another process serves `folder` online (holds its online lock)."""
    import fcntl

    lock_path = folder / "online.lock"
    if not lock_path.is_file():
        return False
    with lock_path.open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
    return False


def choose(
    requested: PackagesMode, folder: Path, probe: Callable[[], str | None] = registry_error
) -> PackagesChoice:
    if requested not in PACKAGES_MODES:
        raise ValueError(f"packages: {requested!r} is not one of {', '.join(PACKAGES_MODES)}")
    if requested == "offline":
        return PackagesChoice(offline=True)
    if online_taken(folder):
        return PackagesChoice(
            True, f"packages: another fleet serves {folder} online; this one serves what is seeded (offline)"
        )
    error = probe()
    if error is not None:
        return PackagesChoice(
            True,
            f"packages: the package registries cannot be reached ({REGISTRY_PROBE}: {error}); "
            f"serving only what is seeded in {folder} (offline)",
        )
    return PackagesChoice(offline=False)


def fleet_admin_args(
    requested: PackagesMode,
    folder: Path | None = None,
    notice: Callable[[str], None] | None = None,
    probe: Callable[[], str | None] = registry_error,
) -> list[str]:
    """`rock admin serve` arguments for the package cache in `folder` (default: the one set-up seeds).
    Online needs no seeding (the cache fills as sandboxes ask); offline needs a seeded folder, and without
    one the fleet has no package cache."""
    from rock.packages.cache import default_folder

    folder = folder or default_folder()
    seeded = (folder / "pypi").is_dir()
    if requested == "offline" and not seeded:
        return []
    choice = choose(requested, folder, probe)
    if choice.fallback is not None:
        missing = "" if seeded else "; nothing is seeded there (`rock packages seed`): no package cache"
        (notice or _stderr)(choice.fallback + missing)
    if choice.offline and not seeded:
        return []
    return ["--package-cache", str(folder), *(["--package-cache-offline"] if choice.offline else [])]


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
