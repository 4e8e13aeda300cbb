"""One call per worker for the creates placed on it at about the same time.

Creates submitted at once reach the admin as separate requests; started one call each, every sandbox paid for
an HTTP call to its worker (httpx and h11 on the admin, FastAPI on the worker: ~40% of the admin's event loop
in a burst of single creates). Here the starts placed on one worker within WINDOW seconds of the first of
them go out as one call of the contract's GROUP_PATH (a "share"), as a group's members already do, and each
caller gets back only its own members' outcomes: the worker reports on every member of a share on its own,
so one member's failure is still only its own.

Placement packs onto a share being gathered (`gathering`) while its worker has room, so a burst's creates
fill shares of up to MOST instead of spreading one per worker; the first member of each share still goes to
the roomiest worker, so the fleet fills evenly. A lone create waits at most WINDOW (milliseconds) for
company.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rock.admin.creates import Outcome
    from rock.sdk.types import SandboxInfo, SandboxSpec

WINDOW = 0.005
"""Seconds a share is gathered after its first member is placed, before its call goes out."""
MOST = 16
"""Members after which a share goes out at once: a worker starts a share's containers together."""

StartShare = Callable[[str, "list[SandboxInfo]", float], Awaitable["dict[str, Outcome]"]]
_Key = tuple[str, str, float]
"""(worker id, image, start timeout): the members of one share must agree on what the call's bound is
computed from (rock.admin.creates._share_call)."""


@dataclass
class _Share:
    members: list[SandboxInfo] = field(default_factory=list)
    deadline: float = float("inf")
    waiters: list[tuple[list[str], asyncio.Future[dict[str, Outcome]]]] = field(default_factory=list)
    timer: asyncio.TimerHandle | None = None


def _key(worker_id: str, spec: SandboxSpec) -> _Key:
    return (worker_id, spec.image, spec.start_timeout)


class Shares:
    def __init__(
        self, start_share: StartShare, spawn: Callable[[Awaitable[None]], None], window: float = WINDOW
    ) -> None:
        self.window = window
        self._start_share = start_share
        self._spawn = spawn
        self._gathering: dict[_Key, _Share] = {}

    def gathering(self, spec: SandboxSpec) -> set[str]:
        """Workers with a share of `spec`'s kind being gathered: where placement packs next."""
        kind = (spec.image, spec.start_timeout)
        return {worker_id for worker_id, image, timeout in self._gathering if (image, timeout) == kind}

    def start(
        self, worker_id: str, infos: list[SandboxInfo], deadline: float
    ) -> Awaitable[dict[str, Outcome]]:
        """Add `infos` (placed on `worker_id`, all of one spec) to the worker's share being gathered, at once
        (so the next create placed sees it): await the result for their outcomes."""
        spec = infos[0].spec
        if spec.build_context:  # a build's bound is its own: such a create keeps a call of its own
            return self._start_share(worker_id, infos, deadline)
        loop = asyncio.get_running_loop()
        key = _key(worker_id, spec)
        share = self._gathering.get(key)
        if share is None:
            share = self._gathering[key] = _Share(timer=loop.call_later(self.window, self._send, key))
        waiter: asyncio.Future[dict[str, Outcome]] = loop.create_future()
        share.members.extend(infos)
        share.deadline = min(share.deadline, deadline)
        share.waiters.append(([info.id for info in infos], waiter))
        if len(share.members) >= MOST:
            self._send(key)
        return waiter

    def _send(self, key: _Key) -> None:
        share = self._gathering.pop(key, None)
        if share is None:
            return
        if share.timer is not None:
            share.timer.cancel()
        self._spawn(self._call(key[0], share))

    async def _call(self, worker_id: str, share: _Share) -> None:
        try:
            outcomes = await self._start_share(worker_id, share.members, share.deadline)
        except asyncio.CancelledError:  # the admin is stopping
            for _, waiter in share.waiters:
                waiter.cancel()
            raise
        except Exception as exc:  # every caller hears of it, not just the first
            for _, waiter in share.waiters:
                if not waiter.done():
                    waiter.set_exception(exc)
            return
        for ids, waiter in share.waiters:
            if not waiter.done():
                waiter.set_result({sandbox_id: outcomes[sandbox_id] for sandbox_id in ids})
