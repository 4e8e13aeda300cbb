"""Images where sandboxes run. Workers list their Docker's images in their heartbeats; placement prefers the
workers that hold a sandbox's image, and a worker given a sandbox whose image it lacks first gets the image
from a worker that holds it: that worker's `docker save` streamed through the admin into this worker's
`docker load` (rock.worker.image_transfer), once per worker and image however many sandboxes wait for it.

An image no worker holds under its name (an alias such as `python:3.11`, or a build context) is left to the
worker, which resolves or builds it as before.

`ImageCopies.make` answers the user API's `POST /v1/images` (`ImageRequest`): one worker builds the folder
(one of the operator's build roots) or resolves the name and reports the tag, working directory and notes;
the tag counts as held there at once, so the sandboxes made from it go there or get a copy.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from typing import TYPE_CHECKING

from rock.images.build import SANDBOX_BUILD_TIMEOUT
from rock.sdk.errors import BadRequest, RockError, SandboxFailed, WorkerUnavailable
from rock.sdk.types import FailureReason, parse_memory
from rock.worker.contract import IMAGE_ENSURE_PATH, IMAGES_PATH, ImageInfo, ImageRequest

if TYPE_CHECKING:
    from rock.admin.service import Admin

log = logging.getLogger("rock.admin")
TRANSFER_TIMEOUT = 600.0
"""Seconds one image may take to go from one worker to another."""
RESOLVE_TIMEOUT = 60.0
"""Seconds a worker may take to resolve an image name (and beyond a build's own deadline, to answer)."""


def tag_of(image: str) -> str:
    """`name[:tag]` as Docker lists it (`name:latest` when no tag is given)."""
    last = image.rsplit("/", 1)[-1]
    return image if ":" in last or "@" in image else f"{image}:latest"


class ImageCopies:
    def __init__(self, admin: Admin) -> None:
        self.admin = admin
        self._copying: dict[tuple[str, str], asyncio.Future[None]] = {}

    def holders(self, image: str) -> set[str]:
        """The workers whose Docker holds `image` under that name."""
        tag = tag_of(image)
        return {w.id for w in self.admin.scheduler.workers.values() if w.images and tag in w.images}

    async def ensure(self, worker_id: str, image: str) -> None:
        """Bring `image` to `worker_id` from a worker that holds it, if it lacks it; SandboxFailed
        (image_error) when the copy fails."""
        tag = tag_of(image)
        worker = self.admin.scheduler.workers.get(worker_id)
        if worker is None or worker.images is None or tag in worker.images:
            return
        sources = sorted(self.holders(image) - {worker_id})
        if not sources:
            return
        key = (worker_id, tag)
        if key in self._copying:
            await asyncio.shield(self._copying[key])
            return
        done = asyncio.get_running_loop().create_future()
        self._copying[key] = done
        try:
            await self._copy(sources[0], worker_id, tag)
            worker.images = worker.images | {tag}
            done.set_result(None)
        except RockError as exc:
            failure = SandboxFailed(
                f"worker {worker_id} lacks image {tag} and copying it from worker {sources[0]} failed: "
                f"{exc.message}",
                FailureReason.IMAGE_ERROR,
            )
            done.set_exception(failure)
            done.exception()  # the waiters raise it; this marks it seen for the ones that gave up
            raise failure from exc
        finally:
            del self._copying[key]

    async def make(self, request: ImageRequest) -> ImageInfo:
        """Build or resolve `request` on one worker: BadRequest for a folder outside the operator's build
        roots or sizes over the admin's limits, ImageFailed (from the worker) when it fails."""
        limits = self.admin.config.limits
        if request.build_context is not None:
            limits.check_build_context(request.build_context)
        if request.cpus > limits.max_cpus:
            raise BadRequest(f"cpus={request.cpus} is over this admin's limit max_cpus={limits.max_cpus}")
        if request.memory_bytes > parse_memory(limits.max_memory):
            raise BadRequest(
                f"memory={request.memory} is over this admin's limit max_memory={limits.max_memory}; ask "
                "for less"
            )
        worker_id = self._builder(request)
        timeout = RESOLVE_TIMEOUT + (SANDBOX_BUILD_TIMEOUT if request.build_context is not None else 0.0)
        response = await self.admin._send(
            worker_id, "POST", IMAGE_ENSURE_PATH, json=request.model_dump(), timeout=timeout
        )
        info = ImageInfo.model_validate_json(response.content)
        worker = self.admin.scheduler.workers.get(worker_id)
        if worker is not None and worker.images is not None:
            worker.images = worker.images | {tag_of(info.tag)}
        return info

    def _builder(self, request: ImageRequest) -> str:
        """The worker that makes `request`: one that holds the image by name, else the same worker for the
        same folder or name each time (while the fleet's workers stay), so one build serves them all."""
        scheduler = self.admin.scheduler
        live = sorted(w for w in scheduler.workers if w not in scheduler.unreachable)
        if not live:
            raise WorkerUnavailable(
                "no worker is connected to build or resolve the image; retry in a few seconds"
            )
        if request.image is not None:
            holders = sorted(self.holders(request.image) & set(live))
            if holders:
                return holders[0]
        key = request.build_context or request.image or ""
        return live[int(hashlib.sha256(key.encode()).hexdigest(), 16) % len(live)]

    async def _copy(self, source: str, target: str, tag: str) -> None:
        log.info("copying image %s from worker %s to worker %s", tag, source, target)
        archive = await self.admin._send(
            source,
            "GET",
            IMAGES_PATH + "/archive",
            params={"name": tag},
            stream=True,
            timeout=TRANSFER_TIMEOUT,
        )
        try:
            await self.admin._send(
                target, "POST", IMAGES_PATH, content=archive.aiter_raw(), timeout=TRANSFER_TIMEOUT
            )
        finally:
            await archive.aclose()
