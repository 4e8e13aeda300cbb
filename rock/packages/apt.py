"""apt-cacher's settings for the fleet: only the configured Debian mirrors, package files keyed by mirror.

apt-cacher is a general HTTP proxy unless told otherwise: `GET /127.0.0.1:PORT/x/dists/x/InRelease` (or an
absolute URL) from a sandbox would reach any host the fleet's machine can reach, host loopback included.
`allowed_locations` limits it to the mirrors below (matched from the start of host/path, at a segment
boundary), and `distinct_namespaces` stores each `.deb` under its mirror's location instead of under its
bare file name, so a file fetched from one place never answers a request for another.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from urllib.parse import urlsplit

# The mirrors of the images sandboxes are built from (debootstrap's default mirror and Debian's security
# archive); `PackageCache(apt_mirrors=...)` takes others.
APT_MIRRORS = (
    "deb.debian.org/debian",
    "deb.debian.org/debian-security",
    "security.debian.org/debian-security",
)

PACKAGE_SUFFIXES = (".deb", ".udeb", ".ddeb")


def apt_settings(mirrors: tuple[str, ...]) -> list[str]:
    """apt-cacher command-line settings that confine it to `mirrors`."""
    return [f"allowed_locations={','.join(mirrors)}", "distinct_namespaces=1"]


def location_allowed(target: str, mirrors: tuple[str, ...]) -> bool:
    """Whether an HTTP request target (absolute `http://host/path` or apt-cacher's `/host/path`) lies under
    one of `mirrors`, as apt-cacher's own check reads it: host and path from the start, whole segments."""
    if target.startswith("http://"):
        parts = urlsplit(target)
        if parts.port is not None or parts.username is not None or parts.query:
            return False
        location = f"{parts.hostname or ''}{parts.path}"
    elif target.startswith("/"):
        location = target[1:]
    else:
        return False
    segments = location.split("/")
    if any(segment in ("", ".", "..") for segment in segments[:-1]) or segments[-1] in (".", ".."):
        return False
    return any(location.startswith(mirror.rstrip("/") + "/") for mirror in mirrors)


def namespace_of(url: str) -> str | None:
    """apt-cacher's namespace of a package URL: host and path up to `pool` or `dists`, joined by '_'."""
    parts = urlsplit(url)
    segments = [parts.hostname or "", *parts.path.split("/")]
    for index in range(len(segments) - 1, -1, -1):
        if segments[index] in ("pool", "dists"):
            return "_".join(segment for segment in segments[:index] if segment)
    return None


def key_package_files(cache: Path, mirrors: tuple[str, ...]) -> None:
    """Move package files cached under their bare name (before namespaces) to their mirror's namespace; a
    file from a location that is not one of `mirrors` is removed, since it must never be served. (Index
    files are cached under their whole host and path already.)"""
    packages, headers, private = cache / "packages", cache / "headers", cache / "private"
    if not packages.is_dir():
        return
    for path in packages.iterdir():
        if path.is_file() and path.name.endswith(PACKAGE_SUFFIXES):
            # Instances starting side by side may move the same file: the one that loses finds it gone.
            with contextlib.suppress(FileNotFoundError):
                _key(path, headers / path.name, private / f"{path.name}.complete", cache, mirrors)


def _key(path: Path, header: Path, complete: Path, cache: Path, mirrors: tuple[str, ...]) -> None:
    url = _header_url(header)
    namespace = namespace_of(url) if url and location_allowed(url, mirrors) else None
    if namespace is None:
        for stale in (path, header, complete):
            stale.unlink(missing_ok=True)
        return
    for kind, item in (("packages", path), ("headers", header), ("private", complete)):
        (cache / kind / namespace).mkdir(parents=True, exist_ok=True)
        if item.is_file():
            item.rename(cache / kind / namespace / item.name)


def _header_url(header: Path) -> str | None:
    with contextlib.suppress(OSError):
        for line in header.read_text(errors="replace").splitlines():
            if line.startswith("X-AptCacher-URL:"):
                return line.split(":", 1)[1].strip()
    return None
