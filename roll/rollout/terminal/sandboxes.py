"""Which sandboxes each rollout worker holds, so none outlives a worker that died mid-episode.

A worker's episodes note every sandbox they open and close in the `SandboxLedger` (a Ray actor of the
driver's); when the driver finds a worker dead, it deletes the sandboxes still listed under it through the
ROCK admin (`delete_sandboxes`), and its episodes are sampled again elsewhere.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

import ray

from rock.sdk import ImageInfo, Sandbox
from rock.sdk.grouping import GroupedOpens
from rome.terminal_tasks.images import ensure_image
from rome.terminal_tasks.rock_sandbox import RockSandbox
from rome.terminal_tasks.task import Task

log = logging.getLogger(__name__)


class SandboxLedger:
    """Open sandboxes by worker id (a plain class; the cluster runs it as a Ray actor)."""

    def __init__(self) -> None:
        self._open: dict[str, set[str]] = {}

    def opened(self, worker_id: str, sandbox_id: str) -> None:
        self._open.setdefault(worker_id, set()).add(sandbox_id)

    def closed(self, worker_id: str, sandbox_id: str) -> None:
        self._open.get(worker_id, set()).discard(sandbox_id)

    def take(self, worker_id: str) -> list[str]:
        """The sandboxes a (dead) worker still holds; they are no longer listed afterwards."""
        return sorted(self._open.pop(worker_id, set()))

    def held(self) -> dict[str, list[str]]:
        return {worker: sorted(ids) for worker, ids in self._open.items() if ids}


def delete_sandboxes(sandbox_ids: list[str], admin_url: str) -> int:
    """Delete the sandboxes on the fleet at `admin_url`; returns how many were still there."""
    from rock.sdk import RockError, Sandbox

    deleted = 0
    for sandbox_id in sandbox_ids:
        try:
            Sandbox.attach(sandbox_id, admin_url=admin_url).close()
            deleted += 1
        except RockError as error:  # already gone (the episode closed it as the worker died)
            log.info("sandbox %s of a dead worker was already gone: %s", sandbox_id, error)
    return deleted


class LedgerSandbox(RockSandbox):
    """A ROCK sandbox of a trial that notes its life in the ledger."""

    def __init__(
        self,
        image: ImageInfo,
        task: Task,
        admin_url: str,
        ledger: Any,
        worker_id: str,
        open_sandbox: Callable[..., Sandbox] = Sandbox,
    ) -> None:
        super().__init__(image, task, admin_url, open_sandbox=open_sandbox)
        self._ledger, self._worker_id = ledger, worker_id
        ray.get(ledger.opened.remote(worker_id, self.rock.id))

    def close(self) -> None:
        super().close()
        with contextlib.suppress(ray.exceptions.RayError):  # the driver is going away: nothing to note
            ray.get(self._ledger.closed.remote(self._worker_id, self.rock.id))


class LedgerProvider:
    """rome-bench's `SandboxProvider` for the trials of one rollout worker. The episodes of a group start
    together (the worker's episode loops take a group's members one after another): their sandboxes come
    from one group create (`GroupedOpens`)."""

    name = "rock"

    def __init__(self, admin_url: str, ledger: Any, worker_id: str) -> None:
        self.admin_url, self.ledger, self.worker_id = admin_url, ledger, worker_id
        self.opens = GroupedOpens()

    def image(self, task: Task) -> ImageInfo:
        """The task's image on the run's fleet (built there when the run started; this finds it built)."""
        return ensure_image(task, self.admin_url)

    def open(self, image: ImageInfo, task: Task) -> LedgerSandbox:
        return LedgerSandbox(image, task, self.admin_url, self.ledger, self.worker_id, self.opens.open)
