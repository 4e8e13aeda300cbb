"""Narrowing a running sandbox's network to `none` and giving it back, without restarting the sandbox.

A task may ask less of the network in one phase than in another (an agent with no network, tests that
install packages). The sandbox is made with the larger policy; `narrow` takes it away for the phase that asks
less and `restore` gives back exactly what the sandbox was made with, never more:

- `bridge`: the container is disconnected from Docker's bridge (it keeps only loopback, as with `none`) and
  connected again. Its egress firewall lives in its own network namespace and survives both.
- `packages`: the package cache's listeners in the socket folder are closed and their socket files removed,
  so the in-sandbox forwarders reach nothing; restoring binds them again.

Only these two moves exist: a sandbox's network can never be widened past what it was made with here.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

import docker
import docker.errors

from rock.worker.containers import container_name
from rock.worker.packages import PackageBridges


class NetworkSwitchError(RuntimeError):
    """Docker refused a connect or disconnect; the message says which and why."""


def _remove_socket(path: Path) -> None:
    """Unlink `path` only when it is a socket (never follow or remove anything else put there)."""
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            path.unlink()


def disconnect_bridge(client: docker.DockerClient, sandbox_id: str) -> None:
    try:
        client.networks.get("bridge").disconnect(container_name(sandbox_id), force=True)
    except docker.errors.APIError as exc:
        if "is not connected" not in str(exc):
            raise NetworkSwitchError(f"docker could not take the sandbox off the bridge: {exc}") from exc


def connect_bridge(client: docker.DockerClient, sandbox_id: str) -> None:
    try:
        client.networks.get("bridge").connect(container_name(sandbox_id))
    except docker.errors.APIError as exc:
        if "already exists" not in str(exc):
            raise NetworkSwitchError(f"docker could not put the sandbox back on the bridge: {exc}") from exc


async def detach_packages(bridges: PackageBridges, sandbox_id: str, host_dir: Path) -> None:
    await bridges.detach(sandbox_id)
    for name, target in bridges.targets.items():
        if target is not None:
            _remove_socket(host_dir / name)


async def attach_packages(bridges: PackageBridges, sandbox_id: str, host_dir: Path) -> None:
    await bridges.attach(sandbox_id, host_dir)


async def switch(
    client: docker.DockerClient,
    bridges: PackageBridges,
    sandbox_id: str,
    host_dir: Path,
    made_with: str,
    current: str,
    wanted: str,
) -> str:
    """Move a sandbox made with `made_with` from `current` to `wanted` (`none`, or `made_with` again)."""
    import asyncio

    from rock.sdk.errors import BadRequest

    if wanted not in ("none", made_with):
        raise BadRequest(
            f"sandbox {sandbox_id} was made with network {made_with!r}: it can be narrowed to 'none' and "
            f"given back, never widened to {wanted!r}; create it with the larger network instead"
        )
    if wanted == current:
        return current
    if made_with == "bridge":
        move = disconnect_bridge if wanted == "none" else connect_bridge
        await asyncio.to_thread(move, client, sandbox_id)
    elif made_with == "packages":
        await (detach_packages if wanted == "none" else attach_packages)(bridges, sandbox_id, host_dir)
    return wanted
