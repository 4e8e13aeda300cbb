import asyncio

import pytest

from rock.admin.scheduler import Demand, Scheduler, Worker, room_after
from rock.sdk.errors import BadRequest, CapacityExceeded
from rock.sdk.types import WorkerCapacity

GiB = 1024**3


def _worker(name: str, cpus: float, memory_gib: int, slots: int = 10) -> Worker:
    return Worker(
        name, f"http://{name}", WorkerCapacity(cpus=cpus, memory=memory_gib * GiB, slots=slots), 0.0
    )


def test_room_after_is_the_tightest_resource():
    capacity = WorkerCapacity(cpus=4, memory=8 * GiB, slots=10)
    assert room_after(capacity, Demand(0, 0, 0), Demand(1, 2 * GiB)) == pytest.approx(0.75)
    assert room_after(capacity, Demand(2, 0, 0), Demand(1, 1 * GiB)) == pytest.approx(0.25)
    assert room_after(capacity, Demand(3.5, 0, 0), Demand(1, 1 * GiB)) is None
    assert room_after(capacity, Demand(0, 0, 10), Demand(0.1, 1)) is None


async def test_placement_picks_the_worker_with_most_free_room():
    scheduler = Scheduler(max_waiting=4)
    scheduler.upsert_worker(_worker("small", 2, 4))
    scheduler.upsert_worker(_worker("big", 8, 16))
    assert await scheduler.reserve("a", Demand(1, GiB), "me", 0) == "big"
    # big: 7/8 cpu, 15/16 mem free -> 0.75 after a second one; small after one: 0.5
    assert await scheduler.reserve("b", Demand(1, GiB), "me", 0) == "big"
    for name in "cdefg":
        await scheduler.reserve(name, Demand(1, GiB), "me", 0)
    assert scheduler.used("big").cpus + scheduler.used("small").cpus == 7
    assert scheduler.used("small").cpus >= 1  # room spread once big filled up


async def test_a_create_that_fits_nowhere_waits_then_gets_the_freed_room():
    scheduler = Scheduler(max_waiting=4)
    scheduler.upsert_worker(_worker("w", 2, 4))
    await scheduler.reserve("a", Demand(2, GiB), "me", 0)
    waiting = asyncio.create_task(scheduler.reserve("b", Demand(1, GiB), "me", 5))
    await asyncio.sleep(0.01)
    assert scheduler.waiting == 1 and not waiting.done()
    scheduler.release("a")
    assert await waiting == "w"
    assert scheduler.waiting == 0 and scheduler.worker_of("b") == "w"


async def test_the_queue_times_out_with_capacity_exceeded():
    scheduler = Scheduler(max_waiting=4, retry_after=7)
    scheduler.upsert_worker(_worker("w", 1, 4))
    await scheduler.reserve("a", Demand(1, GiB), "me", 0)
    with pytest.raises(CapacityExceeded, match=r"within 0\.05 s") as caught:
        await scheduler.reserve("b", Demand(1, GiB), "me", 0.05)
    assert caught.value.retry_after == 7 and scheduler.waiting == 0


async def test_the_queue_is_bounded():
    scheduler = Scheduler(max_waiting=2)
    scheduler.upsert_worker(_worker("w", 1, 4))
    await scheduler.reserve("a", Demand(1, GiB), "me", 0)
    waiters = [asyncio.create_task(scheduler.reserve(n, Demand(1, GiB), "me", 5)) for n in ("b", "c")]
    await asyncio.sleep(0.01)
    with pytest.raises(CapacityExceeded, match="2 creates already wait"):
        await scheduler.reserve("d", Demand(1, GiB), "me", 5)
    scheduler.release("a")
    assert await waiters[0] == "w"
    scheduler.release("b")
    assert await waiters[1] == "w"


async def test_waiters_are_served_in_arrival_order_and_a_new_worker_wakes_them():
    scheduler = Scheduler(max_waiting=8)
    first = asyncio.create_task(scheduler.reserve("first", Demand(1, GiB), "me", 5))
    await asyncio.sleep(0)
    second = asyncio.create_task(scheduler.reserve("second", Demand(1, GiB), "me", 5))
    await asyncio.sleep(0.01)
    scheduler.upsert_worker(_worker("late", 1, 4))
    assert await first == "late"
    assert not second.done()
    scheduler.release("first")
    assert await second == "late"


async def test_a_demand_bigger_than_every_worker_is_refused_at_once():
    scheduler = Scheduler(max_waiting=8)
    scheduler.upsert_worker(_worker("w", 2, 4))
    with pytest.raises(BadRequest, match="no worker can ever hold 3"):
        await scheduler.reserve("a", Demand(3, GiB), "me", 5)


async def test_a_cancelled_waiter_gives_its_room_back():
    scheduler = Scheduler(max_waiting=8)
    scheduler.upsert_worker(_worker("w", 1, 4))
    await scheduler.reserve("a", Demand(1, GiB), "me", 0)
    waiter = asyncio.create_task(scheduler.reserve("b", Demand(1, GiB), "me", 5))
    await asyncio.sleep(0.01)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert scheduler.waiting == 0
    scheduler.release("a")
    assert scheduler.used("w") == Demand(0, 0, 0)


async def test_usage_counts_held_and_queued_sandboxes_per_owner():
    scheduler = Scheduler(max_waiting=8)
    scheduler.upsert_worker(_worker("w", 1, 4))
    await scheduler.reserve("a", Demand(1, GiB), "alice", 0)
    waiter = asyncio.create_task(scheduler.reserve("b", Demand(0.5, GiB), "alice", 5))
    await asyncio.sleep(0.01)
    assert scheduler.usage("alice") == (2, 1.5, 2 * GiB)
    assert scheduler.usage("bob") == (0, 0, 0)
    waiter.cancel()


async def test_an_unreachable_worker_gets_no_placements_until_it_heartbeats():
    scheduler = Scheduler(max_waiting=4)
    scheduler.upsert_worker(_worker("a", 8, 16))
    scheduler.upsert_worker(_worker("b", 2, 4))
    assert scheduler.place(Demand(1, GiB)) == "a"
    scheduler.mark_unreachable("a")
    assert scheduler.place(Demand(1, GiB)) == "b"
    assert await scheduler.reserve("x", Demand(1, GiB), "me", 0) == "b"
    scheduler.mark_unreachable("b")
    with pytest.raises(CapacityExceeded):
        await scheduler.reserve("y", Demand(1, GiB), "me", 0.05)
    scheduler.upsert_worker(_worker("a", 8, 16))  # its next heartbeat
    assert scheduler.place(Demand(1, GiB)) == "a"
    scheduler.mark_unreachable("gone")
    assert scheduler.unreachable == {"b"}
