"""The admin's store writes: off its event loop, many row changes per transaction.

The admin decides in memory and queues each changed row here; one task commits everything queued so far in
one transaction on a thread, and while that commit runs the next changes queue up for the one after (group
commit). So a burst of creates costs a few commits a second instead of two round trips each on the event
loop, and a heartbeat never waits behind a database write. A caller that must not answer before its change
is durable (a create, a delete) awaits `flush()`.
"""

from __future__ import annotations

import asyncio
import logging

from rock.admin.store import SandboxStore
from rock.sdk.errors import RockError
from rock.sdk.types import SandboxInfo

log = logging.getLogger("rock.admin")


class StoreFailed(RockError):
    """The database did not take a change (it is down or refused it)."""

    status = 503


class StoreWriter:
    def __init__(self, store: SandboxStore) -> None:
        self.store = store
        self.commits = 0
        """Transactions committed so far."""
        self._queued: dict[str, tuple[SandboxInfo, float]] = {}
        self._activity: dict[str, float] = {}
        self._waiters: list[asyncio.Future[None]] = []
        self._committing: dict[str, tuple[SandboxInfo, float]] = {}
        self._in_commit: list[asyncio.Future[None]] = []
        """Waiters on the commit under way."""
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        """Commit what is queued, then stop."""
        if self._task is None:
            return
        try:
            await self.flush()
        finally:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def save(self, info: SandboxInfo, last_activity: float) -> None:
        """Queue the sandbox's row; a later save of the same sandbox before the commit replaces it."""
        self._queued[info.id] = (info, last_activity)
        self._wake.set()

    def touch(self, activity: dict[str, float]) -> None:
        """Queue last-request times (`SandboxStore.touch`)."""
        for sandbox_id, when in activity.items():
            self._activity[sandbox_id] = max(when, self._activity.get(sandbox_id, when))
        if activity:
            self._wake.set()

    async def flush(self) -> None:
        """Return once everything queued before this call is committed; raise StoreFailed if it was not."""
        if not self._queued and not self._activity and not self._committing:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        self._wake.set()
        if self._committing:  # rows queued before this call may be in the commit under way: hear of it too
            current = asyncio.get_running_loop().create_future()
            self._in_commit.append(current)
            await asyncio.gather(current, waiter)
            return
        await waiter

    def latest(self, sandbox_id: str) -> SandboxInfo | None:
        """The sandbox's newest row not committed yet, if any: reads look here before the database."""
        row = self._queued.get(sandbox_id) or self._committing.get(sandbox_id)
        return None if row is None else row[0]

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            rows, self._queued = self._queued, {}
            activity, self._activity = self._activity, {}
            waiters, self._waiters = self._waiters, []
            self._committing, self._in_commit = rows, waiters
            try:
                if rows or activity:
                    await asyncio.to_thread(self.store.commit, list(rows.values()), activity)
                    self.commits += 1
            except Exception as exc:  # any driver error: the callers waiting on this commit must hear of it
                error = StoreFailed(
                    f"the admin's database ({self.store.shown_url}) did not record {len(rows)} sandbox "
                    f"changes: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}; check the "
                    "database, then retry"
                )
                log.error("%s", error.message)
                for waiter in waiters:
                    if not waiter.done():
                        waiter.set_exception(error)
            else:
                for waiter in waiters:
                    if not waiter.done():
                        waiter.set_result(None)
            finally:
                self._committing = {}
