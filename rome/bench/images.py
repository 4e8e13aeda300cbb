"""Task images: built once per content hash through ROCK's image alias table, then reused."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

from rome.bench.tasks import Task

_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


class TaskImageError(RuntimeError):
    """A task's Dockerfile did not build; the message carries the tail of the build log."""


def context_hash(context: Path) -> str:
    """Hash of every file's relative path and bytes under the build context."""
    digest = hashlib.sha256()
    for path in sorted(p for p in context.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(context)).encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def image_tag(task: Task) -> str:
    name = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in task.id.lower())
    return f"rome-bench/{name}:{context_hash(task.build_context)}"


def _image_exists(tag: str) -> bool:
    import docker.errors

    import docker

    try:
        docker.from_env().images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def ensure_image(task: Task) -> str:
    """Build the task's image unless an image for the same build context exists; return its tag."""
    tag = image_tag(task)
    with _locks_guard:
        lock = _locks.setdefault(tag, threading.Lock())
    with lock:
        if _image_exists(tag):
            return tag
        try:
            from rock.images import ImageBuildError, build_image
        except ImportError as exc:
            raise TaskImageError(
                "ROCK's image builder (rock.images) is not importable; install ALE with `pip install -e .`"
            ) from exc
        try:
            return build_image(task.build_context, tag=tag)
        except ImageBuildError as exc:
            raise TaskImageError(f"{task.id}: image build failed: {exc}") from exc
