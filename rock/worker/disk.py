"""Disk limits of sandboxes.

Docker limits a container's writable layer only with overlay2 on xfs mounted with pquota (`size=`
storage-opt); a worker on any other host measures each sandbox's disk instead and stops the sandbox that
goes over (reason `disk_quota`). What is measured: the upper layer, the files the sandbox's processes hold
open after deleting them (gone from every folder, their blocks still taken), and the container's log files
(capped by the worker's log settings too). That limit is soft: a fast writer can go over it by what it
writes in one interval plus one measurement, and no more than `disk` in one file (the sandbox's processes
run with RLIMIT_FSIZE at `disk`, so one `fallocate -l 3G` is refused at once).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import stat
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors

from rock.worker.containers import container_name, kill_container
from rock.worker.scratch import LoopScratch, ScratchError

log = logging.getLogger("rock.worker")
CHECK_INTERVAL = 1.0
"""Seconds between two measurements of the sandboxes' upper layers."""


def storage_opt_unsupported(exc: docker.errors.APIError) -> bool:
    """Whether Docker refused a create because its storage driver cannot limit a container's size."""
    return "storage-opt" in str(exc.explanation or exc) or "storage option" in str(exc.explanation or exc)


@dataclass(frozen=True)
class DiskTarget:
    """Where a sandbox's writes land on the host: its upper layer, its container (whose processes may
    hold deleted files open) and its log file."""

    upper: Path
    container_id: str
    log_path: Path | None


def disk_target(client: docker.DockerClient, sandbox_id: str) -> DiskTarget | None:
    """The sandbox's DiskTarget, from one inspect; None without an overlay2 upper layer."""
    found = client.api.inspect_container(container_name(sandbox_id))
    data = found.get("GraphDriver", {}).get("Data") or {}
    if not data.get("UpperDir"):
        return None
    log = found.get("LogPath")
    return DiskTarget(Path(data["UpperDir"]), found["Id"], Path(log) if log else None)


_CGROUP_PROCS = (
    "/sys/fs/cgroup/pids/docker/{id}/cgroup.procs",  # v1, cgroupfs driver
    "/sys/fs/cgroup/pids/system.slice/docker-{id}.scope/cgroup.procs",  # v1, systemd
    "/sys/fs/cgroup/system.slice/docker-{id}.scope/cgroup.procs",  # v2, systemd
    "/sys/fs/cgroup/docker/{id}/cgroup.procs",  # v2, cgroupfs
)


def container_pids(container_id: str) -> list[int]:
    """The host pids of the container's processes (from its cgroup; empty where none is found)."""
    for template in _CGROUP_PROCS:
        try:
            text = Path(template.format(id=container_id)).read_text()
        except OSError:
            continue
        return [int(pid) for pid in text.split()]
    return []


def deleted_open_bytes(pids: list[int]) -> int:
    """Bytes of disk held by regular files the processes `pids` keep open after deleting them (each file
    once): du and a folder walk no longer see them, yet their blocks stay taken until the last close."""
    total, seen = 0, set()
    for pid in pids:
        folder = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(folder)
        except OSError:  # the process exited
            continue
        for fd in fds:
            try:
                if not os.readlink(f"{folder}/{fd}").endswith(" (deleted)"):
                    continue
                info = os.stat(f"{folder}/{fd}")
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode) and (info.st_dev, info.st_ino) not in seen:
                seen.add((info.st_dev, info.st_ino))
                total += info.st_blocks * 512
    return total


def log_bytes(log_path: Path | None) -> int:
    """Bytes of the container's json log and its rotated files."""
    if log_path is None:
        return 0
    total = 0
    for path in log_path.parent.glob(log_path.name + "*"):
        with contextlib.suppress(OSError):
            total += path.stat().st_blocks * 512
    return total


def sandbox_disk_bytes(target: DiskTarget) -> int:
    """What the sandbox holds on the host's disk: upper layer, deleted-but-open files and logs."""
    return (
        disk_usage(target.upper)
        + deleted_open_bytes(container_pids(target.container_id))
        + log_bytes(target.log_path)
    )


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
    """How this worker holds sandboxes to their disk limit, the sandboxes it measures, and those found over
    it (and stopped). In order of preference: Docker's `size=` (xfs with pquota), a filesystem of the
    sandbox's own size (rock.worker.scratch: loop devices), or measuring every CHECK_INTERVAL."""

    def __init__(self, blocking: Callable[..., Awaitable[Any]], scratch: LoopScratch | None = None) -> None:
        """`blocking(fn, *args)`: runs a blocking call off the event loop. `scratch`: where per-sandbox
        filesystems may be made (None: never)."""
        self._blocking = blocking
        self.hard_limits: bool | None = None
        """Whether Docker enforces `size=` here; None until the first create finds out."""
        self.scratch = scratch
        self._scratch_problem: str | None = None if scratch is not None else "no scratch folder given"
        self._scratch_checked = scratch is None
        self._bounded: set[str] = set()
        """Sandboxes on a filesystem of their own size: nothing to measure."""
        self._watched: dict[str, tuple[DiskTarget, int]] = {}
        self.exceeded: dict[str, str] = {}
        """Sandbox id -> why it was stopped."""

    async def start(self, start: Callable[..., Awaitable[str]], sandbox_id: str = "", disk: int = 0) -> str:
        """`start(disk_quota=..., prepare=...)` with Docker's hard disk limit; once Docker refuses it (its
        storage driver cannot), from then on with a filesystem of the sandbox's own size where this host can
        make one, else with this watch measuring instead."""
        if self.hard_limits is not False:
            try:
                container_id = await start(disk_quota=True)
            except docker.errors.APIError as exc:
                if not storage_opt_unsupported(exc):
                    raise
                log.warning(
                    "Docker here cannot limit a container's disk (%s); this worker gives each sandbox a "
                    "filesystem of its own size where it can, else measures its writes (docker/README.md)",
                    exc.explanation or exc,
                )
                self.hard_limits = False
            else:
                self.hard_limits = True
                return container_id
        if not self._scratch_checked:
            self._scratch_checked = True
            assert self.scratch is not None
            self._scratch_problem = await self._blocking(self.scratch.usable)
            if self._scratch_problem is not None:
                log.warning(
                    "no per-sandbox filesystems here (%s): disk limits are measured (soft)",
                    self._scratch_problem,
                )
        if self._scratch_problem is None and sandbox_id:
            return await start(
                disk_quota=False, prepare=functools.partial(self._own_filesystem, sandbox_id, disk)
            )
        return await start(disk_quota=False)

    def _own_filesystem(
        self, sandbox_id: str, disk: int, client: docker.DockerClient, container_id: str
    ) -> None:
        """Between the container's create and start (blocking): its layer folder onto a filesystem of
        `disk` bytes. If that fails the sandbox is measured instead, and the worker says why."""
        assert self.scratch is not None
        try:
            upper = client.api.inspect_container(container_id)["GraphDriver"]["Data"]["UpperDir"]
            self.scratch.attach(sandbox_id, Path(upper).parent, disk)
        except (ScratchError, KeyError, TypeError, OSError, docker.errors.APIError) as exc:
            log.warning(
                "sandbox %s gets no filesystem of its own (%s): its disk is measured", sandbox_id, exc
            )
            return
        self._bounded.add(sandbox_id)

    async def release(self, sandbox_id: str) -> None:
        """Before the container is removed: detach its filesystem (Docker cannot remove a mounted layer)."""
        self._bounded.discard(sandbox_id)
        if self.scratch is not None:
            await self._blocking(self.scratch.detach, sandbox_id)

    async def release_others(self, keep: set[str]) -> None:
        """Detach the filesystems of sandboxes this worker no longer has (left by a crash)."""
        if self.scratch is not None:
            for sandbox_id in await self._blocking(self.scratch.sandboxes):
                if sandbox_id not in keep:
                    await self.release(sandbox_id)
                else:
                    self._bounded.add(sandbox_id)

    async def follow(self, client: docker.DockerClient, sandbox_id: str, limit: int) -> None:
        """Measure the sandbox's disk from now on, unless its limit is enforced (Docker, own filesystem)."""
        if self.hard_limits or sandbox_id in self._bounded:
            return
        target = await self._blocking(disk_target, client, sandbox_id)
        if target is not None:
            self._watched[sandbox_id] = (target, limit)

    async def run(self, client: docker.DockerClient) -> None:
        """Forever: every CHECK_INTERVAL, kill the containers of the sandboxes over their limit."""
        while True:
            await asyncio.sleep(CHECK_INTERVAL)
            try:
                for sandbox_id, used, limit in await self._blocking(self.over_limit):
                    detail = (
                        f"the sandbox holds {used / 2**20:.0f} MiB of disk (its filesystem, files it deleted "
                        f"but keeps open, its log), over its disk limit "
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
        for sandbox_id, (target, limit) in list(self._watched.items()):
            used = sandbox_disk_bytes(target)
            if used > limit:
                found.append((sandbox_id, used, limit))
        return found
