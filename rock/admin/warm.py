"""The warm pool (`rock admin serve --warm IMAGE=N`): N started sandboxes of an image with the default spec,
so that a create asking for exactly that spec takes one at once, with no container start on its path.

A pooled sandbox is an ordinary live sandbox (a row in the store, a container on a worker) owned by
POOL_OWNER. A matching create takes the youngest: it changes owner, its TTL and idle clocks start then, and
the pool starts a replacement in the background. Refills ask for free room only (queue_timeout 0): the pool
never waits for room, nor takes room that users' creates wait for. A sandbox leaves the pool once and for
good: deleted by its user it is removed like any other, never handed out again. A sandbox that has waited in
the pool for half its TTL is replaced (its TTL label must not run out under its next user).

On restart the store's running pool sandboxes come back to the pool (adopted); ones of an image no longer
configured are removed; pending ones have failed, as every pending sandbox does on restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from rock.admin.auth import LOCAL
from rock.admin.config import KeyPolicy
from rock.admin.scheduler import demand_of
from rock.sdk.errors import RockError
from rock.sdk.types import SandboxInfo, SandboxSpec, SandboxState

if TYPE_CHECKING:
    from rock.admin.service import Admin

log = logging.getLogger("rock.admin")
POOL_OWNER = "warm-pool"
POOL = KeyPolicy.model_construct(name=POOL_OWNER, key="", max_sandboxes=None, max_cpus=None, max_memory=None)
"""The pool's own caller: no quota (the pool's size is the operator's choice)."""
REFILL_INTERVAL = 1.0
"""Seconds between looks at the pool when nothing was taken (a take wakes it at once)."""


def pool_label_ttl(info: SandboxInfo) -> float | None:
    """A pool sandbox waits in the pool up to half its TTL before its TTL starts: its container's lifetime
    label (rock.worker.lifetime) must give it both, or another fleet could remove it from under its user."""
    return info.spec.ttl * 1.5 if info.owner == POOL_OWNER else None


class WarmPool:
    def __init__(self, admin: Admin, sizes: dict[str, int]) -> None:
        self.admin = admin
        self.sizes = {image: n for image, n in sizes.items() if n > 0}
        self.specs = {image: SandboxSpec(image=image) for image in self.sizes}
        self.ready: dict[str, list[str]] = {image: [] for image in self.sizes}
        """Pooled sandbox ids per image, oldest first."""
        self.starting = dict.fromkeys(self.sizes, 0)
        self._wake = asyncio.Event()
        self._failed_at: dict[str, float] = {}

    def adopt(self, info: SandboxInfo) -> None:
        """A pool sandbox the store had running when the admin started: back in the pool, or removed."""
        if self.specs.get(info.spec.image) == info.spec and info.state is SandboxState.RUNNING:
            self.ready[info.spec.image].append(info.id)
        else:
            log.info("removing pool sandbox %s: its image is no longer pooled", info.id)
            self.admin._spawn(self.admin.delete(info.id, LOCAL))

    def take(self, spec: SandboxSpec, caller: KeyPolicy) -> SandboxInfo | None:
        """A running pool sandbox handed to `caller` when `spec` is the pool's, else None (start it cold)."""
        if self.specs.get(spec.image) != spec or caller.name == POOL_OWNER:  # a refill starts new ones
            return None
        admin, ready = self.admin, self.ready[spec.image]
        while ready:
            info = admin._live.get(ready.pop())
            if info is None or info.state is not SandboxState.RUNNING or info.owner != POOL_OWNER:
                continue  # it failed (its worker lost, say) while it waited
            now = datetime.now(UTC)
            handed = info.model_copy(
                update={
                    "owner": caller.name,
                    "started_at": now,
                    "expires_at": now + timedelta(seconds=spec.ttl),
                }
            )
            assert info.worker_id is not None
            admin.scheduler.restore(info.id, info.worker_id, demand_of(spec), caller.name)  # its room, theirs
            admin._activity[info.id] = time.time()
            admin._save(handed)
            admin.metrics.pool.labels("hit").inc()
            self._wake.set()
            return handed
        admin.metrics.pool.labels("miss").inc()
        self._wake.set()
        return None

    async def run(self) -> None:
        """Keep every image's pool full (and young), until cancelled."""
        while True:
            for image, size in self.sizes.items():
                self._retire_old(image)
                missing = size - len(self.ready[image]) - self.starting[image]
                backing_off = time.monotonic() - self._failed_at.get(image, -1e9) < 10 * REFILL_INTERVAL
                if missing > 0 and not backing_off:
                    self.starting[image] += missing
                    self.admin._spawn(self._fill(image, missing))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), REFILL_INTERVAL)
            self._wake.clear()

    def _retire_old(self, image: str) -> None:
        spec, cutoff = self.specs[image], datetime.now(UTC)
        for sandbox_id in list(self.ready[image]):
            info = self.admin._live.get(sandbox_id)
            if (
                info is not None
                and info.started_at
                and (cutoff - info.started_at).total_seconds() > spec.ttl / 2
            ):
                self.ready[image].remove(sandbox_id)
                self.admin._spawn(self.admin.delete(sandbox_id, LOCAL))

    async def _fill(self, image: str, count: int) -> None:
        try:
            outcomes = await self.admin.creates.members(self.specs[image], count, 0.0, POOL)
        except RockError as exc:
            outcomes = [("", exc)]
        finally:
            self.starting[image] -= count
        errors = [o for _, o in outcomes if isinstance(o, RockError)]
        self.ready[image] += [o.id for _, o in outcomes if isinstance(o, SandboxInfo)]
        if errors:
            self._failed_at[image] = time.monotonic()
            log.warning(
                "the warm pool of %s started %d of %d sandboxes (%s); it tries again in %.0f s",
                image,
                count - len(errors),
                count,
                errors[0].message,
                10 * REFILL_INTERVAL,
            )
        self._wake.set()

    @property
    def pooled(self) -> int:
        return sum(len(ids) for ids in self.ready.values())
