"""Task images, made by the ROCK fleet (`rock.sdk.images.Images`): a worker builds the task's environment
folder (which must lie under one of the fleet's build roots: `rock admin serve --build-context-root`, or
`PrivateFleet(build_roots=...)`) through its alias table, and answers the tag, the image's working directory
and how its base images differ from what the Dockerfile names. The caller needs no Docker of its own."""

from __future__ import annotations

import threading
from typing import Literal

from rock.sdk import ImageInfo, Images, RockError
from rome.terminal_tasks.task import Task

BuildNetwork = Literal["none", "packages", "bridge"]
BUILD_MEMORY_MB = 2048
"""The least memory a task's build gets (its sandbox may ask for less than pip or apt need to install)."""

_locks: dict[tuple[str, str, str], threading.Lock] = {}
_locks_guard = threading.Lock()


def base_images(task: Task) -> list[str]:
    """The images a task builds on: its Dockerfile's FROM lines (not its own stages), or its image."""
    if task.dockerfile is None:
        return [task.image] if task.image else []
    stages: set[str] = set()
    bases: list[str] = []
    for line in task.dockerfile.read_text(errors="replace").splitlines():
        words = [w for w in line.split() if not w.startswith("--")]
        if len(words) < 2 or words[0].upper() != "FROM":
            continue
        if words[1].lower() not in stages and "$" not in words[1]:
            bases.append(words[1])
        if len(words) >= 4 and words[2].upper() == "AS":
            stages.add(words[3].lower())
    return bases


class TaskImageError(RuntimeError):
    """A task's image did not build or resolve on the fleet; the message carries the tail of the build log."""


def image_repository(task: Task) -> str:
    """`rome-bench/<task id>`; the fleet tags it with the hash of the build context, so two task folders with
    one id but other files (two task sets, or a regenerated task) never share an image."""
    name = "".join(
        ch if (ch.isascii() and ch.isalnum()) or ch in "-_." else "-" for ch in task.id.lower()
    ).strip("-_.")
    return f"rome-bench/{name or 'task'}"


def ensure_image(task: Task, admin_url: str | None, network: BuildNetwork | None = None) -> ImageInfo:
    """The task's image on the fleet at `admin_url`: built from its environment folder (a build of content
    built before returns at once) or its `image` resolved. `network`: what the build's RUN steps reach; None
    is the fleet's package cache where it has one, else none. TaskImageError when it fails."""
    url = fleet_url(admin_url)
    network = network or default_build_network(url)
    key = (url, str(task.path), network)
    with _locks_guard:
        lock = _locks.setdefault(key, threading.Lock())
    images = Images(admin_url=url)
    with lock:  # the attempts of one task ask at once: one waits for the other's build, then finds it built
        try:
            if task.build_context is None or task.dockerfile is None:
                return images.ensure(image=task.image or "")
            return images.ensure(
                build_context=str(task.build_context.resolve()),
                dockerfile=task.dockerfile.name,
                repository=image_repository(task),
                network=network,
                cpus=task.cpus,
                memory=f"{max(task.memory_mb, BUILD_MEMORY_MB)}m",
            )
        except (RockError, ValueError) as exc:
            raise TaskImageError(f"{task.id}: the fleet did not make its image: {exc}") from exc


def fleet_url(admin_url: str | None) -> str:
    from rock.sdk.calls import admin_url as resolve

    return resolve(admin_url)


def fleet_health(admin_url: str | None) -> dict:
    """The admin's /health (its package cache, workers); {} when it does not answer."""
    import httpx

    try:
        reply = httpx.get(f"{fleet_url(admin_url)}/health", timeout=10).json()
    except (httpx.HTTPError, ValueError):
        return {}
    return reply if isinstance(reply, dict) else {}


_networks: dict[str, BuildNetwork] = {}


def default_build_network(admin_url: str) -> BuildNetwork:
    """`packages` on a fleet with a package cache (a task's `pip install` builds offline), else `none`: the
    fleet's answer now, or when it does not answer, its last answer in this process (the build arguments of
    `packages` are part of the image's content, so a run keeps asking for the same while its admin is briefly
    unreachable; a new fleet on the same address is asked afresh)."""
    if health := fleet_health(admin_url):
        _networks[admin_url] = "packages" if health.get("package_cache") else "none"
    return _networks.get(admin_url, "none")
