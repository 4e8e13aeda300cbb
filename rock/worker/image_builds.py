"""Images the admin asks this worker for (`POST IMAGE_ENSURE_PATH`): built from a folder on this host or
resolved through the alias table, on the worker's thread pool (rock.images.ensure does the work).

The admin has checked that a build's folder is one of the operator's build roots before it asks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rock.sdk.errors import ImageFailed
from rock.worker.contract import ImageInfo, ImageRequest

if TYPE_CHECKING:
    from rock.worker.service import WorkerService


async def ensure(worker: WorkerService, request: ImageRequest) -> ImageInfo:
    """The image's `ImageInfo`, naming this worker; ImageFailed with the builder's message."""
    from rock.images.build import PackageCacheArgs
    from rock.images.ensure import ensure_local
    from rock.images.errors import ImageError

    config = worker.config
    cache = PackageCacheArgs(config.pypi_cache, config.apt_cache) if config.pypi_cache else None
    try:
        info = await worker._blocking(ensure_local, request, worker.docker, cache)
    except ImageError as exc:
        raise ImageFailed(f"worker {config.id}: {exc}") from exc
    return info.model_copy(update={"worker": config.id})
