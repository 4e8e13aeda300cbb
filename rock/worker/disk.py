"""Disk limits of sandboxes.

Docker limits a container's writable layer only with overlay2 on xfs mounted with pquota (`size=`
storage-opt); a worker on any other host measures each sandbox's upper layer instead and stops the sandbox
that goes over (reason `disk_quota`). That limit is soft: a fast writer can go over it by what it writes in
one interval plus one measurement.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import docker
import docker.errors

from rock.worker.containers import container_name, kill_container

log = logging.getLogger("rock.worker")
CHECK_INTERVAL = 1.0
"""Seconds between two measurements of the sandboxes' upper layers."""


def storage_opt_unsupported(exc: docker.errors.APIError) -> bool:
    """Whether Docker refused a create because its storage driver cannot limit a container's size."""
    return "storage-opt" in str(exc.explanation or exc) or "storage option" in str(exc.explanation or exc)


def upper_dir(client: docker.DockerClient, sandbox_id: str) -> Path | None:
    """The host folder holding what the container wrote to its own filesystem (overlay2's upper layer)."""
    data = client.api.inspect_container(container_name(sandbox_id)).get("GraphDriver", {}).get("Data") or {}
    return Path(data["UpperDir"]) if data.get("UpperDir") else None


def disk_usage(folder: Path) -> int:
    """Bytes of disk under `folder` (allocated blocks, each hard-linked file once), symlinks not followed."""
    total, seen, pending = 0, set(), [str(folder)]
    while pending:
        try:
            entries = list(os.scandir(pending.pop()))
        except OSError:  # removed while walking, or not a folder
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if info.st_nlink > 1:
                if (info.st_dev, info.st_ino) in seen:
                    continue
                seen.add((info.st_dev, info.st_ino))
            total += info.st_blocks * 512
            if entry.is_dir(follow_symlinks=False):
                pending.append(entry.path)
    return total


class DiskWatch:
    """The sandboxes whose disk limit Docker does not enforce, and those found over it (and stopped)."""

    def __init__(self, blocking: Callable[..., Awaitable[Any]]) -> None:
        """`blocking(fn, *args)`: runs a blocking call off the event loop."""
        self._blocking = blocking
        self.hard_limits: bool | None = None
        """Whether Docker enforces `size=` here; None until the first create finds out."""
        self._watched: dict[str, tuple[Path, int]] = {}
        self.exceeded: dict[str, str] = {}
        """Sandbox id -> why it was stopped."""

    async def start(self, start: Callable[..., Awaitable[str]]) -> str:
        """`start(disk_quota=...)` with Docker's hard disk limit; once Docker refuses it (its storage driver
        cannot), without it from then on, this watch enforcing the limit instead."""
        if self.hard_limits is not False:
            try:
                container_id = await start(disk_quota=True)
            except docker.errors.APIError as exc:
                if not storage_opt_unsupported(exc):
                    raise
                log.warning(
                    "Docker here cannot limit a container's disk (%s); this worker measures each sandbox's "
                    "writes instead and stops the ones over their limit (a soft limit: see docker/README.md)",
                    exc.explanation or exc,
                )
                self.hard_limits = False
            else:
                self.hard_limits = True
                return container_id
        return await start(disk_quota=False)

    async def follow(self, client: docker.DockerClient, sandbox_id: str, limit: int) -> None:
        """Measure the sandbox's upper layer from now on, unless Docker enforces its disk limit."""
        if self.hard_limits:
            return
        upper = await self._blocking(upper_dir, client, sandbox_id)
        if upper is not None:
            self._watched[sandbox_id] = (upper, limit)

    async def run(self, client: docker.DockerClient) -> None:
        """Forever: every CHECK_INTERVAL, kill the containers of the sandboxes over their limit."""
        while True:
            await asyncio.sleep(CHECK_INTERVAL)
            try:
                for sandbox_id, used, limit in await self._blocking(self.over_limit):
                    detail = (
                        f"the sandbox wrote {used / 2**20:.0f} MiB to its filesystem, over its disk limit "
                        f"of {limit / 2**20:.0f} MiB, and was stopped; create it with a larger `disk`, or "
                        "have it write less"
                    )
                    log.warning("stopping sandbox %s: %s", sandbox_id, detail)
                    self.forget(sandbox_id)
                    self.exceeded[sandbox_id] = detail
                    await self._blocking(kill_container, client, sandbox_id)
            except Exception:
                log.exception("the disk watch failed once; it keeps running")

    def forget(self, sandbox_id: str) -> None:
        """Stop measuring the sandbox; why it was stopped stays known, for calls still in flight to report."""
        self._watched.pop(sandbox_id, None)

    def over_limit(self) -> list[tuple[str, int, int]]:
        """(sandbox id, bytes used, limit) of each watched sandbox over its limit (blocking: it walks)."""
        found = []
        for sandbox_id, (upper, limit) in list(self._watched.items()):
            used = disk_usage(upper)
            if used > limit:
                found.append((sandbox_id, used, limit))
        return found
