"""One `ImageRequest` made good on this host's Docker: a build (alias table, content-hash tag, a sandbox's
limits) or a name resolved through the alias table, answered as an `ImageInfo`. The worker runs it for the
admin's `POST /v1/images` (rock.worker.contract.IMAGE_ENSURE_PATH); rome-bench's plain-Docker runs call it
directly."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from rock.images.aliases import difference, load_aliases
from rock.images.build import (
    BuildLimits,
    PackageCacheArgs,
    base_names,
    build_image,
    docker_client,
    resolve_image,
    workdir_of,
)
from rock.images.errors import ImageBuildError, ImageError
from rock.sdk.types import ImageInfo, ImageRequest

_locks: dict[tuple[str, str, str | None, str], threading.Lock] = {}
_locks_guard = threading.Lock()


def ensure_local(
    request: ImageRequest, client: Any = None, package_cache: PackageCacheArgs | None = None
) -> ImageInfo:
    """Build `request.build_context` (one build at a time per folder and name: a second asker waits and then
    finds it built) or resolve `request.image`; ImageError says what failed. `package_cache`: where a
    `packages` build's pip, uv and apt fetch (None: such a build is refused)."""
    client = client or docker_client()
    table = load_aliases()
    if request.build_context is None:
        name = request.image or ""
        bases = [name]
        tag = resolve_image(name, table, client)
    else:
        context = Path(request.build_context)
        source = context / request.dockerfile
        if not source.is_file():
            raise ImageBuildError(
                f"no {request.dockerfile} in {context}: name the folder that holds the Dockerfile "
                "(a task's environment/ folder)"
            )
        bases = base_names(source.read_text(errors="replace"))
        cache, limits = _limits(request, package_cache)
        key = (str(context), request.dockerfile, request.repository, request.network)
        with _locks_guard:
            lock = _locks.setdefault(key, threading.Lock())
        with lock:
            tag = build_image(
                context,
                dockerfile=request.dockerfile,
                aliases=table,
                package_cache=cache,
                limits=limits,
                repository=request.repository,
            )
    notes = [note for name in bases if (note := difference(name, table)) is not None]
    return ImageInfo(tag=tag, workdir=workdir_of(client, tag), notes=notes)


def _limits(
    request: ImageRequest, package_cache: PackageCacheArgs | None
) -> tuple[PackageCacheArgs | None, BuildLimits]:
    """The build's limits: the request's CPUs and memory for each RUN step, its network, the sandbox build
    deadline. A `packages` build reaches the cache the way builds on this host always have: the host's
    network with pip, uv and apt pointed at the cache by build arguments (a build cannot use a sandbox's
    socket forwarder); the folder it builds is one of the operator's build roots."""
    if request.network != "packages":
        return None, BuildLimits(network=request.network, memory=request.memory_bytes, cpus=request.cpus)
    if package_cache is None:
        raise ImageError(
            "a `packages` build needs the fleet's package cache and this worker has none: start the fleet "
            "with `rock admin serve --package-cache online|offline`, or build with network none"
        )
    return package_cache, BuildLimits(network="host", memory=request.memory_bytes, cpus=request.cpus)
