"""Images where sandboxes run. Workers list their Docker's images in their heartbeats; placement prefers the
workers that hold a sandbox's image, and a worker given a sandbox whose image it lacks first gets the image
from a worker that holds it: that worker's `docker save` streamed through the admin into this worker's
`docker load` (rock.worker.image_transfer), once per worker and image however many sandboxes wait for it.

An image no worker holds under its name (an alias such as `python:3.11`, or a build context) is left to the
worker, which resolves or builds it as before.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from rock.sdk.errors import RockError, SandboxFailed
from rock.sdk.types import FailureReason
from rock.worker.contract import IMAGES_PATH

if TYPE_CHECKING:
    from rock.admin.service import Admin

log = logging.getLogger("rock.admin")
TRANSFER_TIMEOUT = 600.0
"""Seconds one image may take to go from one worker to another."""


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
