"""Nothing outlives its fleet: who owns a private fleet, whether that owner still runs, and which containers
on a Docker host belong to fleets that are gone.

A private fleet (`rock.fleet.LocalFleet`: tests, `roll train`, rome-bench) is owned by the process that
launched it, named to its admin and workers in ROCK_FLEET_OWNER (its pid). Each sandbox's container carries
labels that say who owns its fleet (host, boot id, pid and the pid's start time, so a reused pid is not
mistaken for the owner) and when its TTL runs out. Then:

- the worker of a private fleet checks every second that its owner runs; once it does not, it removes its
  containers and stops (`OwnerWatch`), whether or not the launcher's own guard process survived;
- every worker that starts, and every minute after, removes the containers of other fleets that are gone
  (`reap_gone_fleets`): their owner is known dead (same host and boot, and its pid is gone or is another
  process), or their TTL ran out more than `GRACE` seconds ago (no process was left to enforce it).

Containers without these labels (made before them) are never touched.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors

log = logging.getLogger("rock.worker.lifetime")

OWNER_ENV = "ROCK_FLEET_OWNER"
LABEL_OWNER_HOST = "rock.owner.host"
LABEL_OWNER_BOOT = "rock.owner.boot"
LABEL_OWNER_PID = "rock.owner.pid"
LABEL_OWNER_START = "rock.owner.start"
LABEL_OWNER_PIDNS = "rock.owner.pidns"
"""The owner's pid namespace: its pid means something only to a process in the same one."""
LABEL_EXPIRES = "rock.expires"
"""Unix time when the sandbox's TTL runs out."""
LABEL_SANDBOX = "rock.sandbox"
LABEL_FLEET = "rock.fleet"
SOCKET_MOUNT = "/run/rock"
GRACE = 60.0
"""Seconds past a container's TTL before another fleet removes it: its own admin stops it at once."""


def boot_id() -> str:
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def pid_namespace() -> str:
    return os.readlink("/proc/self/ns/pid")


def start_time(pid: int) -> str | None:
    """The process's start time (clock ticks since boot), or None when no process has that pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name (field 2) may hold spaces and parentheses: fields count from its closing one.
    return stat.rsplit(")", 1)[1].split()[19]


@dataclass(frozen=True)
class Owner:
    host: str
    boot: str
    pid: int
    start: str

    @classmethod
    def of(cls, pid: int) -> Owner:
        started = start_time(pid)
        if started is None:
            raise ValueError(f"{OWNER_ENV}={pid}: no process has that pid; the fleet's owner is already gone")
        return cls(socket.gethostname(), boot_id(), pid, started)

    @classmethod
    def from_env(cls) -> Owner | None:
        """The owner named in ROCK_FLEET_OWNER, or None for a fleet that lives on its own."""
        value = os.environ.get(OWNER_ENV)
        if not value:
            return None
        if not value.isdigit():
            raise ValueError(f"{OWNER_ENV}={value!r} is not a process id; unset it or give the owner's pid")
        return cls.of(int(value))

    def labels(self) -> dict[str, str]:
        return {
            LABEL_OWNER_HOST: self.host,
            LABEL_OWNER_BOOT: self.boot,
            LABEL_OWNER_PID: str(self.pid),
            LABEL_OWNER_START: self.start,
            LABEL_OWNER_PIDNS: pid_namespace(),
        }

    def alive(self) -> bool:
        return start_time(self.pid) == self.start


def owner_gone(labels: dict[str, str]) -> bool:
    """Whether the labels prove the container's fleet owner dead: it ran on this host in this boot, in this
    pid namespace, and its pid is gone or now another process; or it ran on this host in an earlier boot.
    False when unknown."""
    keys = (LABEL_OWNER_HOST, LABEL_OWNER_BOOT, LABEL_OWNER_PID, LABEL_OWNER_START, LABEL_OWNER_PIDNS)
    host, boot, pid, start, pidns = (labels.get(k) for k in keys)
    if not (host and boot and pid and pid.isdigit() and start) or host != socket.gethostname():
        return False
    if boot != boot_id():
        return True
    # Another pid namespace's pids are not ours to look up (a fleet run in a container on this host).
    return pidns == pid_namespace() and start_time(int(pid)) != start


def expired(labels: dict[str, str], now: float) -> bool:
    try:
        return float(labels[LABEL_EXPIRES]) + GRACE < now
    except (KeyError, ValueError):
        return False


def sandbox_labels(ttl: float, owner: Owner | None) -> dict[str, str]:
    """The lifetime labels of a new sandbox's container."""
    return {LABEL_EXPIRES: f"{time.time() + ttl:.0f}", **(owner.labels() if owner else {})}


def reap_gone_fleets(client: docker.DockerClient, own_fleet: str) -> list[str]:
    """Remove the containers of other fleets that are gone (see the module's doc); returns their sandbox ids.
    Blocking: run it off the event loop."""
    from rock.worker.socket_dir import release_host_dir

    reaped, now = [], time.time()
    for c in client.api.containers(all=True, filters={"label": LABEL_SANDBOX}):
        labels = c.get("Labels") or {}
        if labels.get(LABEL_FLEET) == own_fleet:
            continue
        dead, late = owner_gone(labels), expired(labels, now)
        if not (dead or late):
            continue
        why = "its fleet's owner is gone" if dead else "its TTL ran out and its fleet did not stop it"
        log.warning("removing container %s (sandbox %s): %s", c["Id"][:12], labels.get(LABEL_SANDBOX), why)
        try:
            client.api.remove_container(c["Id"], force=True)
        except docker.errors.NotFound:
            continue
        except docker.errors.APIError as exc:
            if exc.status_code != 409:  # 409: its removal is under way already
                log.warning("could not remove container %s: %s", c["Id"][:12], exc)
                continue
        for mount in c.get("Mounts") or []:
            if mount.get("Destination") == SOCKET_MOUNT and mount.get("Source"):
                release_host_dir(Path(mount["Source"]))
        reaped.append(labels.get(LABEL_SANDBOX, c["Id"]))
    return reaped


async def watch_owner(owner: Owner, on_gone: Callable[[], Awaitable[None]], interval: float = 1.0) -> None:
    """Call `on_gone` once the fleet's owner no longer runs (the lease of a private fleet's sandboxes)."""
    while owner.alive():
        await asyncio.sleep(interval)
    log.warning("the fleet's owner (pid %d) is gone: its sandboxes end with it", owner.pid)
    await on_gone()


async def reap_every(
    blocking: Callable[..., Awaitable[list[str]]],
    client: docker.DockerClient,
    own_fleet: str,
    interval: float,
) -> None:
    """`reap_gone_fleets` every `interval` seconds (through `blocking`, the worker's thread pool)."""
    while True:
        await asyncio.sleep(interval)
        try:
            await blocking(reap_gone_fleets, client, own_fleet)
        except docker.errors.DockerException as exc:
            log.warning("reaping the containers of gone fleets failed this time: %s", exc)
