"""The admin's batched store writes (rock.admin.writer): many row changes per commit, off the event loop, a
create answered only once its row is committed, and heartbeats answered while creates wait on the database.

`GatedStore` is a test double named as such: the real store, whose commits wait until the test opens a gate
(a database that is slow or locked), or fail (a database that went away).
"""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime

import httpx
import pytest
import uvicorn

from rock.admin.app import create_app
from rock.admin.auth import LOCAL
from rock.admin.config import AdminConfig
from rock.admin.service import Admin
from rock.admin.states import advance
from rock.admin.store import SandboxStore
from rock.admin.writer import StoreFailed, StoreWriter
from rock.sdk.types import FailureReason, SandboxInfo, SandboxSpec, SandboxState
from rock.serving import bind, uvicorn_config
from rock.worker.contract import HEARTBEAT_PATH, Heartbeat, HeartbeatReply, WorkerSandbox
from rock.worker.simulated import SimulatedRuntime, SimulatedWorker

S = SandboxState


class GatedStore(SandboxStore):
    """A real store whose commits wait for `gate` (and raise instead while `refuse` is set)."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.refuse = False

    def commit(self, rows, activity) -> None:  # type: ignore[no-untyped-def]
        self.entered.set()
        self.gate.wait(timeout=60)
        if self.refuse:
            raise ConnectionError("server closed the connection unexpectedly")
        super().commit(rows, activity)


def _info(sandbox_id: str, state: SandboxState = S.PENDING) -> SandboxInfo:
    pending = SandboxInfo(
        id=sandbox_id,
        state=S.PENDING,
        spec=SandboxSpec(),
        owner="local",
        worker_id="w1",
        created_at=datetime.now(UTC),
    )
    return pending if state is S.PENDING else advance(pending, state)


async def _until(condition, what: str) -> None:  # type: ignore[no-untyped-def]
    for _ in range(3000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting until {what}")


async def test_changes_queued_during_a_commit_land_together_in_the_next_one(database_url):
    store = GatedStore(database_url)
    writer = StoreWriter(store)
    writer.start()
    try:
        writer.save(_info("a"), 1.0)
        await asyncio.to_thread(store.entered.wait, 10)  # the first commit (a) holds the database
        writer.save(_info("b"), 2.0)
        writer.save(_info("c"), 3.0)
        writer.save(_info("b", S.RUNNING), 4.0)  # replaces b's queued row: one upsert, the newest
        flushed = asyncio.create_task(writer.flush())
        await asyncio.sleep(0.05)
        assert not flushed.done()
        assert writer.latest("b").state is S.RUNNING and writer.latest("a").state is S.PENDING
        store.gate.set()
        await flushed
        assert writer.commits == 2
        assert writer.latest("a") is None and writer.latest("b") is None
    finally:
        store.gate.set()
        await writer.close()
        store.close()
    fresh = SandboxStore(database_url)
    rows = {info.id: (info.state, last) for info, last in fresh.list()}
    fresh.close()
    assert rows == {"a": (S.PENDING, 1.0), "b": (S.RUNNING, 4.0), "c": (S.PENDING, 3.0)}


async def test_a_commit_the_database_refuses_reaches_those_waiting_on_it(tmp_path):
    store = GatedStore(f"sqlite:///{tmp_path / 'admin.db'}")
    store.refuse = True
    store.gate.set()
    writer = StoreWriter(store)
    writer.start()
    try:
        writer.save(_info("a"), 1.0)
        with pytest.raises(StoreFailed, match="did not record 1 sandbox changes: server closed the conn"):
            await writer.flush()
        store.refuse = False
        writer.save(_info("a", S.RUNNING), 2.0)
        await writer.flush()
        assert store.get("a")[0].state is S.RUNNING
    finally:
        await writer.close()
        store.close()


class _Fleet:
    """An admin on `GatedStore` and one simulated worker (starts in no time), served on loopback in this
    event loop."""

    def __init__(self, tmp_path, database_url: str) -> None:  # type: ignore[no-untyped-def]
        self.admin = Admin(AdminConfig(state_dir=tmp_path, database_url=database_url, reap_interval=3600))
        self.store = GatedStore(database_url)
        self.store.gate.set()
        self.admin.writer.store = self.store
        self.sock = bind("127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.worker = SimulatedWorker(
            "w1", self.url, self.admin.auth.worker_token, SimulatedRuntime([0.0], [0.0], seed="w1"), slots=64
        )
        self.servers = [
            uvicorn.Server(uvicorn_config(create_app(self.admin), "warning")),
            uvicorn.Server(uvicorn_config(self.worker.app(), "warning")),
        ]
        self.tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> _Fleet:
        self.tasks = [
            asyncio.create_task(self.servers[0].serve(sockets=[self.sock])),
            asyncio.create_task(self.servers[1].serve(sockets=[self.worker.sock])),
        ]
        await _until(lambda: all(s.started for s in self.servers), "the servers listen")
        self.http = httpx.AsyncClient(base_url=self.url, timeout=60)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.store.gate.set()
        await self.http.aclose()
        for server in self.servers:
            server.should_exit = True
        await asyncio.gather(*self.tasks)
        self.store.close()

    async def beat(self) -> HeartbeatReply:
        beat = Heartbeat(
            worker_id=self.worker.id,
            listed_at=datetime.now(UTC),
            url=self.worker.url,
            capacity=self.worker.capacity,
            sandboxes=[WorkerSandbox(id=sid, status="running") for sid in self.worker.runtime.sandboxes],
        )
        response = await self.http.post(
            HEARTBEAT_PATH,
            content=beat.model_dump_json(),
            headers={
                "Authorization": f"Bearer {self.admin.auth.worker_token}",
                "Content-Type": "application/json",
            },
        )
        assert response.status_code == 200, response.text
        return HeartbeatReply.model_validate_json(response.content)

    async def create(self) -> httpx.Response:
        return await self.http.post("/v1/sandboxes", json={"image": "busybox", "cpus": 0.5})


async def test_heartbeats_are_answered_while_creates_wait_for_their_commit(tmp_path, database_url):
    async with _Fleet(tmp_path, database_url) as fleet:
        await fleet.beat()
        fleet.store.gate.clear()
        creates = [asyncio.create_task(fleet.create()) for _ in range(20)]
        live = fleet.admin._live
        await _until(
            lambda: len(live) == 20 and all(i.state is S.RUNNING for i in live.values()),
            "every create has started on the worker and waits for its row",
        )
        commits = fleet.admin.writer.commits

        heard = fleet.admin.scheduler.workers["w1"].last_heartbeat
        reply = await fleet.beat()
        assert reply.remove == []  # it lists 20 sandboxes the admin holds as running
        assert fleet.admin.scheduler.workers["w1"].last_heartbeat > heard
        workers = await fleet.http.get("/v1/workers")
        assert workers.json()[0]["sandboxes"] == 20
        assert not any(c.done() for c in creates)  # none answered before its row is committed

        fleet.store.gate.set()
        answers = await asyncio.gather(*creates)
        assert [a.status_code for a in answers] == [201] * 20
        # The commit that held the database, then every other row of the 20 creates in one transaction.
        assert fleet.admin.writer.commits == commits + 2
        durable = SandboxStore(database_url)
        try:
            for answer in answers:
                row = durable.get(answer.json()["id"])
                assert row is not None and row[0].state is S.RUNNING
        finally:
            durable.close()


async def test_a_create_whose_row_the_database_refuses_fails_and_frees_its_container(tmp_path):
    async with _Fleet(tmp_path, f"sqlite:///{tmp_path / 'admin.db'}") as fleet:
        await fleet.beat()
        kept = await fleet.create()
        assert kept.status_code == 201
        fleet.store.refuse = True
        refused = await fleet.create()
        assert refused.status_code == 503
        assert "did not record" in refused.json()["message"]
        fleet.store.refuse = False
        await _until(lambda: len(fleet.worker.runtime.sandboxes) == 1, "the refused sandbox is removed")
        assert set(fleet.worker.runtime.sandboxes) == {kept.json()["id"]}
        assert list(fleet.admin._live) == [kept.json()["id"]]
        listed = (await fleet.http.get("/v1/sandboxes")).json()
        assert [(i["id"], i["state"]) for i in listed if i["state"] == "running"] == [
            (kept.json()["id"], "running")
        ]


async def test_a_worker_whose_heartbeats_are_late_is_lost_only_when_it_does_not_answer(tmp_path):
    """In a burst, a worker's heartbeats wait in the admin's queue behind creates: its answers to those
    creates, or to the admin's question whether it runs, show it alive. One that answers nothing is lost."""
    async with _Fleet(tmp_path, f"sqlite:///{tmp_path / 'admin.db'}") as fleet:
        await fleet.beat()
        worker = fleet.admin.scheduler.workers["w1"]
        created = await fleet.create()
        assert created.status_code == 201
        sandbox_id = created.json()["id"]

        worker.last_heartbeat -= 60  # far past heartbeat_timeout (15 s), but it just answered the create
        fleet.admin._check_once()
        assert "w1" not in fleet.admin._probing

        worker.last_answer -= 60  # silent both ways: the admin asks it, and it answers
        fleet.admin._check_once()
        assert "w1" in fleet.admin._probing
        await _until(lambda: "w1" not in fleet.admin._probing, "the admin has its answer")
        assert fleet.admin.scheduler.workers.get("w1") is worker
        assert (await fleet.admin.get(sandbox_id, LOCAL)).state is S.RUNNING

        fleet.servers[1].should_exit = True  # the worker stops answering
        await fleet.tasks[1]
        worker.last_heartbeat -= 60
        worker.last_answer -= 60
        fleet.admin._check_once()
        await _until(lambda: "w1" not in fleet.admin.scheduler.workers, "the worker is lost")
        lost = await fleet.admin.get(sandbox_id, LOCAL)
        assert (lost.state, lost.failure_reason) == (S.FAILED, FailureReason.WORKER_LOST)
