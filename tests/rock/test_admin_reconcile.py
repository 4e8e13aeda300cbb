"""The admin's bookkeeping against worker heartbeats, restarts and silent workers (no Docker needed)."""

import asyncio
from datetime import UTC, datetime, timedelta

from rock.admin.auth import LOCAL
from rock.admin.config import AdminConfig
from rock.admin.service import Admin
from rock.admin.states import advance
from rock.sdk.types import (
    FailureReason,
    SandboxInfo,
    SandboxSpec,
    SandboxState,
    WorkerCapacity,
)
from rock.worker.contract import Heartbeat, WorkerSandbox

S = SandboxState
LONG_AGO = datetime.now(UTC) - timedelta(minutes=5)
NOWHERE = "http://127.0.0.1:9"  # the discard port: refuses at once when the admin frees a container


def _running(sandbox_id: str, worker_id: str = "w1") -> SandboxInfo:
    pending = SandboxInfo(
        id=sandbox_id,
        state=S.PENDING,
        spec=SandboxSpec(),
        owner="local",
        worker_id=worker_id,
        created_at=LONG_AGO,
    )
    return advance(pending, S.RUNNING, now=LONG_AGO)


def _beat(*sandboxes: WorkerSandbox, worker_id: str = "w1") -> Heartbeat:
    return Heartbeat(
        worker_id=worker_id,
        listed_at=datetime.now(UTC),
        url=NOWHERE,
        capacity=WorkerCapacity(cpus=4, memory=8 * 1024**3, slots=8),
        sandboxes=list(sandboxes),
    )


async def _admin(tmp_path, database_url: str, *infos: SandboxInfo) -> Admin:
    config = AdminConfig(
        state_dir=tmp_path, database_url=database_url, heartbeat_timeout=5, reap_interval=3600
    )
    admin = Admin(config)
    for info in infos:
        admin.store.save(info, last_activity=LONG_AGO.timestamp())
    await admin.start()
    return admin


async def test_a_restarted_admin_holds_running_sandboxes_and_fails_half_started_ones(tmp_path, database_url):
    starting = SandboxInfo(
        id="p", state=S.PENDING, spec=SandboxSpec(), owner="local", worker_id="w1", created_at=LONG_AGO
    )
    admin = await _admin(tmp_path, database_url, _running("a"), starting)
    try:
        assert (await admin.get("a", LOCAL)).state is S.RUNNING
        assert admin.scheduler.worker_of("a") == "w1" and admin.scheduler.worker_of("p") is None
        failed = await admin.get("p", LOCAL)
        assert (failed.state, failed.failure_reason) == (S.FAILED, FailureReason.START_ERROR)
        assert "admin restarted" in (failed.detail or "")
    finally:
        await admin.close()


async def test_heartbeats_reconcile_containers_with_the_store(tmp_path, database_url):
    admin = await _admin(tmp_path, database_url, _running("kept"), _running("vanished"), _running("oom"))
    try:
        reply = admin.heartbeat(
            _beat(
                WorkerSandbox(id="kept", status="running"),
                WorkerSandbox(id="oom", status="oom_killed", detail="out of memory"),
                WorkerSandbox(id="stranger", status="running"),
            )
        )
        assert sorted(reply.remove) == ["oom", "stranger"]
        assert (await admin.get("kept", LOCAL)).state is S.RUNNING
        oom, vanished = await admin.get("oom", LOCAL), await admin.get("vanished", LOCAL)
        assert (oom.state, oom.failure_reason, oom.detail) == (
            S.FAILED,
            FailureReason.OOM_KILLED,
            "out of memory",
        )
        assert (vanished.state, vanished.failure_reason) == (S.FAILED, FailureReason.WORKER_LOST)
        assert admin.scheduler.used("w1").slots == 1
    finally:
        await admin.close()


async def test_a_sandbox_started_after_the_listing_is_not_judged_missing(tmp_path, database_url):
    fresh = advance(
        SandboxInfo(
            id="new",
            state=S.PENDING,
            spec=SandboxSpec(),
            owner="local",
            worker_id="w1",
            created_at=datetime.now(UTC),
        ),
        S.RUNNING,
    )
    admin = await _admin(tmp_path, database_url, fresh)
    try:
        admin.heartbeat(_beat())
        assert (await admin.get("new", LOCAL)).state is S.RUNNING
    finally:
        await admin.close()


async def test_a_silent_worker_is_lost_with_its_sandboxes(tmp_path, database_url):
    admin = await _admin(tmp_path, database_url, _running("a"), _running("b", worker_id="w2"))
    try:
        admin.heartbeat(_beat(WorkerSandbox(id="a", status="running")))
        admin.heartbeat(_beat(WorkerSandbox(id="b", status="running"), worker_id="w2"))
        admin.scheduler.workers["w1"].last_heartbeat -= 60
        admin._check_once()  # asks w1 whether it runs: nothing listens at its address
        for _ in range(500):
            if "w1" not in admin.scheduler.workers:
                break
            await asyncio.sleep(0.01)
        assert set(admin.scheduler.workers) == {"w2"}
        lost = await admin.get("a", LOCAL)
        assert (lost.state, lost.failure_reason) == (S.FAILED, FailureReason.WORKER_LOST)
        assert (await admin.get("b", LOCAL)).state is S.RUNNING
        assert [i.id for i in await admin.list(LOCAL)] == ["a", "b"]
    finally:
        await admin.close()


async def test_the_reaper_stops_expired_and_idle_sandboxes(tmp_path, database_url):
    import asyncio

    idle = _running("idle").model_copy(update={"spec": SandboxSpec(idle_timeout=60)})
    expired = _running("expired").model_copy(update={"expires_at": datetime.now(UTC) - timedelta(seconds=1)})
    busy = _running("busy").model_copy(update={"spec": SandboxSpec(idle_timeout=60)})
    admin = await _admin(tmp_path, database_url, idle, expired, busy)
    try:
        admin.heartbeat(_beat(*(WorkerSandbox(id=i, status="running") for i in ("idle", "expired", "busy"))))
        admin._activity["busy"] = datetime.now(UTC).timestamp()
        admin._check_once()
        for _ in range(100):
            if len(admin._live) == 1:
                break
            await asyncio.sleep(0.02)
        assert (await admin.get("busy", LOCAL)).state is S.RUNNING
        assert (await admin.get("idle", LOCAL)).state is S.STOPPED and "idle for more than 60 s" in (
            await admin.get("idle", LOCAL)
        ).detail
        assert (await admin.get("expired", LOCAL)).state is S.STOPPED and "ttl" in (
            await admin.get("expired", LOCAL)
        ).detail
    finally:
        await admin.close()


async def test_a_failure_a_heartbeat_recorded_first_is_the_one_callers_get(tmp_path, database_url):
    """The disk watch stops a sandbox: the heartbeat says disk_quota, then the command in flight sees its
    container go; the caller must get disk_quota too, not the later 'worker lost'."""
    from rock.admin.states import as_recorded
    from rock.sdk.errors import SandboxFailed

    admin = await _admin(tmp_path, database_url, _running("full"))
    try:
        admin.heartbeat(_beat(WorkerSandbox(id="full", status="disk_quota", detail="over 200 MiB")))
        full = await admin.get("full", LOCAL)
        later = await admin._failed(full, FailureReason.WORKER_LOST, "its container is gone")
        assert (later.state, later.failure_reason) == (S.FAILED, FailureReason.DISK_QUOTA)
        assert later.detail == "over 200 MiB"
        seen = as_recorded(later, SandboxFailed("its container is gone", FailureReason.WORKER_LOST))
        assert (seen.reason, seen.message) == (FailureReason.DISK_QUOTA, "over 200 MiB")
    finally:
        await admin.close()
