"""Task images: built through ROCK's image builder (alias table, content-hash cache), once per run."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from rome.terminal_tasks.task import Task

if TYPE_CHECKING:
    from rock.images.build import PackageCacheArgs

_locks: dict[str, threading.Lock] = {}
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


def image_notes(task: Task) -> list[str]:
    """A note for each base image whose local stand-in differs from it (another Python, Debian for Ubuntu)."""
    from rock.images.aliases import difference, load_aliases
    from rock.images.errors import ImageConfigError

    try:
        table = load_aliases()
    except ImageConfigError:
        return []
    return [note for name in base_images(task) if (note := difference(name, table)) is not None]


class TaskImageError(RuntimeError):
    """A task's Dockerfile did not build; the message carries the tail of the build log."""


def image_tag(task: Task) -> str:
    """`rome-bench/<task id>:<hash of the build context>`: two task folders with one id but other files (two
    task sets, or a regenerated task) never share a tag, so one build cannot swap the image under the other's
    trials."""
    from rock.images.build import context_hash

    name = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in task.id.lower())
    if task.build_context is None or task.dockerfile is None:
        return f"rome-bench/{name}:latest"
    digest = context_hash(task.build_context, task.dockerfile.read_text(), [])
    return f"rome-bench/{name}:{digest[:12]}"


def ensure_image(task: Task, package_cache: PackageCacheArgs | None = None) -> str:
    """Build the task's image; ROCK's builder returns at once when the same content was built before.

    With `package_cache`, the build's pip, uv and apt steps fetch through the fleet's package cache.
    """
    from rock.images.build import build_image, resolve_image
    from rock.images.errors import ImageError

    if task.build_context is None or task.dockerfile is None:
        try:
            return resolve_image(task.image or "")
        except ImageError as exc:
            raise TaskImageError(f"{task.id}: {exc}") from exc
    tag = image_tag(task)
    with _locks_guard:
        lock = _locks.setdefault(tag, threading.Lock())
    with lock:
        try:
            return build_image(
                task.build_context, tag=tag, dockerfile=task.dockerfile.name, package_cache=package_cache
            )
        except ImageError as exc:
            raise TaskImageError(f"{task.id}: image build failed: {exc}") from exc
