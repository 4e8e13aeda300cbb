"""Placement and admission: which worker gets a sandbox, and a bounded queue for creates that must wait.

The scheduler holds one reservation per live sandbox (on a worker) and one waiter per queued create. A
worker's used room is the sum of its reservations, so releasing a sandbox or adding a worker wakes the queue.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from rock.sdk.errors import BadRequest, CapacityExceeded, RockError
from rock.sdk.types import SandboxSpec, WorkerCapacity


class ClientGone(RockError):
    """The client of a create disconnected: nobody is left to answer (nginx's 499)."""

    status = 499


@dataclass(frozen=True)
class Demand:
    cpus: float
    memory: int
    slots: int = 1


@dataclass
class Worker:
    id: str
    url: str
    capacity: WorkerCapacity
    last_heartbeat: float
    last_answer: float = 0.0
    images: frozenset[str] | None = None
    """The `repository:tag` of the images its Docker holds, as its last listing said (None: not known)."""
    """When it last answered one of the admin's requests: as good a sign of life as a heartbeat, and in a
    burst of creates, whose heartbeats queue behind them in the admin, a more recent one."""

    @property
    def last_heard(self) -> float:
        return max(self.last_heartbeat, self.last_answer)


@dataclass
class _Reservation:
    worker_id: str
    demand: Demand
    owner: str


@dataclass
class _Waiter:
    sandbox_id: str
    demand: Demand
    owner: str
    future: asyncio.Future[str] = field(repr=False)


_NOTHING = Demand(0.0, 0, 0)


def demand_of(spec: SandboxSpec) -> Demand:
    return Demand(spec.cpus, spec.memory_bytes)


def _add(total: Demand, demand: Demand, sign: int) -> Demand:
    return Demand(
        total.cpus + sign * demand.cpus,
        total.memory + sign * demand.memory,
        total.slots + sign * demand.slots,
    )


def room_after(capacity: WorkerCapacity, used: Demand, demand: Demand) -> float | None:
    """The free fraction of the tightest resource once `demand` is placed, or None if it does not fit."""
    free = (
        (capacity.cpus - used.cpus - demand.cpus) / capacity.cpus if capacity.cpus else -1.0,
        (capacity.memory - used.memory - demand.memory) / capacity.memory if capacity.memory else -1.0,
        (capacity.slots - used.slots - demand.slots) / capacity.slots if capacity.slots else -1.0,
    )
    tightest = min(free)
    return None if tightest < -1e-9 else tightest


class Scheduler:
    def __init__(self, max_waiting: int, retry_after: float = 5.0) -> None:
        self.max_waiting = max_waiting
        self.retry_after = retry_after
        self.workers: dict[str, Worker] = {}
        self.unreachable: set[str] = set()
        """Workers a connection just failed to: no placements until their next heartbeat."""
        self._reservations: dict[str, _Reservation] = {}
        # Running sums per worker and per owner, so placing one sandbox costs O(workers), not O(sandboxes).
        self._by_worker: dict[str, Demand] = {}
        self._by_owner: dict[str, Demand] = {}
        self._waiters: deque[_Waiter] = deque()

    # workers ----------------------------------------------------------------------------------------
    def upsert_worker(self, worker: Worker) -> None:
        self.workers[worker.id] = worker
        self.unreachable.discard(worker.id)
        self._dispatch()

    def remove_worker(self, worker_id: str) -> None:
        self.workers.pop(worker_id, None)
        self.unreachable.discard(worker_id)

    def mark_unreachable(self, worker_id: str) -> None:
        if worker_id in self.workers:
            self.unreachable.add(worker_id)

    def used(self, worker_id: str) -> Demand:
        return self._by_worker.get(worker_id, _NOTHING)

    def _hold(self, sandbox_id: str, reservation: _Reservation) -> None:
        self._drop(sandbox_id)
        self._reservations[sandbox_id] = reservation
        for totals, key in ((self._by_worker, reservation.worker_id), (self._by_owner, reservation.owner)):
            totals[key] = _add(totals.get(key, _NOTHING), reservation.demand, 1)

    def _drop(self, sandbox_id: str) -> bool:
        reservation = self._reservations.pop(sandbox_id, None)
        if reservation is None:
            return False
        for totals, key in ((self._by_worker, reservation.worker_id), (self._by_owner, reservation.owner)):
            left = _add(totals[key], reservation.demand, -1)
            if left.slots:
                totals[key] = left
            else:
                del totals[key]
        return True

    # placement --------------------------------------------------------------------------------------
    def place(self, demand: Demand, prefer: Iterable[set[str] | None] = ()) -> str | None:
        """The worker with the most free room left after placing `demand`, or None when none fits; among
        each `prefer` set in turn first (a group's worker so far, those holding the image) when one fits."""
        for among in prefer:
            if among:
                preferred = self._place(demand, among)
                if preferred is not None:
                    return preferred
        return self._place(demand, None)

    def _place(self, demand: Demand, among: set[str] | None) -> str | None:
        best: tuple[float, str] | None = None
        # Only the preferred ones are looked at when there are some: a burst's creates prefer a few workers.
        candidates = (
            self.workers.values() if among is None else (self.workers[w] for w in among if w in self.workers)
        )
        for worker in candidates:
            if worker.id in self.unreachable:
                continue
            room = room_after(worker.capacity, self.used(worker.id), demand)
            if room is not None and (
                best is None or room > best[0] or (room == best[0] and worker.id < best[1])
            ):
                best = (room, worker.id)
        return None if best is None else best[1]

    def restore(self, sandbox_id: str, worker_id: str, demand: Demand, owner: str) -> None:
        """Re-hold the room of a sandbox that was live before the admin restarted."""
        self._hold(sandbox_id, _Reservation(worker_id, demand, owner))

    def release(self, sandbox_id: str) -> None:
        if self._drop(sandbox_id):
            self._dispatch()

    def worker_of(self, sandbox_id: str) -> str | None:
        reservation = self._reservations.get(sandbox_id)
        return None if reservation is None else reservation.worker_id

    # admission --------------------------------------------------------------------------------------
    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def queue(self) -> list[tuple[str, str, Demand]]:
        """The creates waiting for room, first in line first: (sandbox id, owner, demand)."""
        return [(waiter.sandbox_id, waiter.owner, waiter.demand) for waiter in self._waiters]

    def usage(self, owner: str) -> tuple[int, float, int]:
        """(sandboxes, cpus, memory bytes) that `owner` holds or waits for."""
        total = self._by_owner.get(owner, _NOTHING)
        for waiter in self._waiters:
            if waiter.owner == owner:
                total = _add(total, waiter.demand, 1)
        return total.slots, total.cpus, total.memory

    def check_possible(self, demand: Demand) -> None:
        """Raise BadRequest when no known worker could ever hold `demand`, even empty."""
        if self.workers and all(
            room_after(w.capacity, Demand(0.0, 0, 0), demand) is None for w in self.workers.values()
        ):
            biggest = max(self.workers.values(), key=lambda w: (w.capacity.cpus, w.capacity.memory))
            raise BadRequest(
                f"no worker can ever hold {demand.cpus} CPUs and {demand.memory} bytes of memory "
                f"(the largest "
                f"has {biggest.capacity.cpus} CPUs, {biggest.capacity.memory} bytes); ask for less"
            )

    def place_now(
        self, sandbox_id: str, demand: Demand, owner: str, prefer: Iterable[set[str] | None] = ()
    ) -> str | None:
        """Reserve room at once and return the worker's id, or None when none has room or creates already
        wait (they go first)."""
        if self._waiters:
            return None
        worker_id = self.place(demand, prefer)
        if worker_id is not None:
            self._hold(sandbox_id, _Reservation(worker_id, demand, owner))
        return worker_id

    async def reserve(
        self, sandbox_id: str, demand: Demand, owner: str, timeout: float, gone: asyncio.Event | None = None
    ) -> str:
        """Reserve room for a sandbox and return its worker's id, waiting in the queue up to `timeout`.

        Raises BadRequest when no known worker could ever hold it, CapacityExceeded when the queue is full
        or the timeout passes first, ClientGone when `gone` is set while it waits (its client went away).
        """
        self.check_possible(demand)
        worker_id = self.place_now(sandbox_id, demand, owner)
        if worker_id is not None:
            return worker_id
        if len(self._waiters) >= self.max_waiting:
            raise CapacityExceeded(
                f"the fleet is full and {len(self._waiters)} creates already wait; "
                "retry later or ask for less",
                retry_after=self.retry_after,
            )
        waiter = _Waiter(sandbox_id, demand, owner, asyncio.get_running_loop().create_future())
        self._waiters.append(waiter)
        left = asyncio.ensure_future((gone or asyncio.Event()).wait())
        try:
            await asyncio.wait({waiter.future, left}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            if waiter.future.done():  # the caller went away after room was found: give it back
                self.release(sandbox_id)
            raise
        finally:
            left.cancel()
            if waiter in self._waiters:
                self._waiters.remove(waiter)
        if gone is not None and gone.is_set():
            if waiter.future.done():
                self.release(sandbox_id)
            raise ClientGone(f"the client of create {sandbox_id} disconnected while it waited for room")
        if waiter.future.done():  # placed, possibly in the same instant the timeout fired
            return waiter.future.result()
        raise CapacityExceeded(
            f"no worker had room for {demand.cpus} CPUs and {demand.memory} bytes within {timeout:g} s; "
            "retry later, ask for less, or add a worker",
            retry_after=self.retry_after,
        )

    def refuse_waiters(self, error: Exception) -> None:
        """Fail every create still waiting for room with `error` (the admin is stopping)."""
        for waiter in list(self._waiters):
            if not waiter.future.done():
                waiter.future.set_exception(error)

    def _dispatch(self) -> None:
        """Give freed room to waiters in arrival order (first fit)."""
        for waiter in list(self._waiters):
            if waiter.future.done():
                continue
            worker_id = self.place(waiter.demand)
            if worker_id is not None:
                self._hold(waiter.sandbox_id, _Reservation(worker_id, waiter.demand, waiter.owner))
                self._waiters.remove(waiter)
                waiter.future.set_result(worker_id)
