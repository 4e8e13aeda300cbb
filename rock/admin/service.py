"""The admin's logic: admission, placement, the state machine, worker heartbeats, and the reaper.

Decisions are made in memory: `_live` holds the pending and running sandboxes and the scheduler their room,
so neither placing a sandbox, forwarding a command nor answering a heartbeat reads the database. The store
is the durable record, written off the event loop in batches (rock.admin.writer); a create or a delete is
answered only once its row is committed. Workers are reached over HTTP (the local one too), with the fleet's
worker credential.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from datetime import timedelta

import httpx

from rock.admin.auth import LOCAL, Authenticator, may_see, worker_token
from rock.admin.config import AdminConfig, KeyPolicy
from rock.admin.control import ControlListener
from rock.admin.creates import Creates, error_body, group_summary
from rock.admin.images import ImageCopies
from rock.admin.metrics import AdminMetrics
from rock.admin.scheduler import Scheduler, Worker, demand_of
from rock.admin.states import LIVE, advance, as_recorded, failure_reason_of, path_to
from rock.admin.store import SandboxStore, safe_url
from rock.admin.warm import POOL_OWNER, WarmPool
from rock.admin.worker_calls import WorkerCalls, WorkerUnreachable
from rock.admin.writer import StoreWriter
from rock.sdk.errors import (
    RockError,
    SandboxFailed,
    SandboxNotFound,
    SandboxNotRunning,
    WorkerUnavailable,
)
from rock.sdk.types import (
    CreateGroupRequest,
    CreateSandboxRequest,
    FailureReason,
    GroupCreated,
    GroupMember,
    SandboxInfo,
    SandboxSpec,
    SandboxState,
)
from rock.worker.contract import (
    HEALTH_PATH,
    Heartbeat,
    HeartbeatReply,
    sandbox_path,
)

log = logging.getLogger("rock.admin")
_CLOCK_SKEW = timedelta(seconds=5)
"""Margin between the admin's and a worker's clocks when judging which sandboxes a heartbeat must list."""
S = SandboxState


def _spec_of(request: CreateSandboxRequest) -> SandboxSpec:
    """The spec a create request carries, as the request's validation checked it (the request is a
    SandboxSpec with more fields): validating it again cost ~250 us a create, its image parsed once more."""
    return SandboxSpec.model_construct(
        _fields_set=request.model_fields_set & SandboxSpec.model_fields.keys(),
        **{name: getattr(request, name) for name in SandboxSpec.model_fields},
    )


class Admin:
    def __init__(self, config: AdminConfig) -> None:
        self.config = config
        self.auth = Authenticator(config.api_keys, config.host, worker_token(config))
        self.store = SandboxStore(config.store_url)
        self.writer = StoreWriter(self.store)
        self.scheduler = Scheduler(config.max_waiting)
        self.metrics = AdminMetrics(lambda: self.scheduler.waiting, lambda: len(self.scheduler.workers))
        self.calls = WorkerCalls(self.auth.worker_token)
        self.creates = Creates(self)
        self.images = ImageCopies(self)
        self._live: dict[str, SandboxInfo] = {}
        self._on_worker: dict[str | None, set[str]] = {}
        """Live sandbox ids per worker, so a heartbeat costs O(that worker's sandboxes)."""
        self._activity: dict[str, float] = {}
        self._dirty_activity: dict[str, float] = {}
        self._in_flight: dict[str, int] = {}
        """Requests being forwarded per sandbox: a sandbox running a command is not idle."""
        self._stopping: set[str] = set()
        self._probing: set[str] = set()
        """Workers being asked whether they run, their heartbeats late."""
        self._started = time.monotonic()
        self._tasks: set[asyncio.Task[None]] = set()
        self.pool = WarmPool(self, config.warm) if config.warm else None
        """Started sandboxes waiting for a create of their spec (rock.admin.warm), or None."""
        self.control: ControlListener | None = None
        """Heartbeats and /health on a thread of their own (rock.admin.control), from start()."""

    @property
    def live_count(self) -> int:
        """Sandboxes pending or running."""
        return len(self._live)

    # lifecycle of the admin itself ------------------------------------------------------------------
    @property
    def control_port(self) -> int | None:
        return None if self.control is None else self.control.port

    def note_alive(self, worker_id: str) -> None:
        """A known worker's heartbeat arrived (called from the control listener's thread: one float write)."""
        worker = self.scheduler.workers.get(worker_id)
        if worker is not None:
            worker.last_heartbeat = time.monotonic()

    async def start(self) -> None:
        """Reload the store: running sandboxes hold their room again; ones caught starting have failed."""
        self.control = ControlListener(self, self.config.host, self.config.control_port)
        self.control.start()
        self.writer.start()
        for info, last_activity in self.store.list(LIVE):
            if info.state is S.PENDING:
                self._save(
                    advance(
                        info,
                        S.FAILED,
                        reason=FailureReason.START_ERROR,
                        detail="the admin restarted while this sandbox was starting; create it again",
                    )
                )
                continue
            self._hold_live(info)
            self._activity[info.id] = last_activity
            if info.worker_id is not None:
                self.scheduler.restore(info.id, info.worker_id, demand_of(info.spec), info.owner)
        self.metrics.live.set(len(self._live))
        self._spawn(self._monitor())
        pooled = [info for info in self._live.values() if info.owner == POOL_OWNER]
        if self.pool is not None:
            for info in pooled:
                self.pool.adopt(info)
            self._spawn(self.pool.run())
        else:
            for info in pooled:  # the admin no longer keeps a pool: they are nobody's
                self._spawn(self.delete(info.id, LOCAL))

    async def close(self) -> None:
        if self._live:
            log.warning(
                "%d sandboxes keep running: an admin started again with this state folder (%s) takes them "
                "back; `rock sandbox rm --all` before stopping removes them instead",
                len(self._live),
                safe_url(self.config.store_url),
            )
        if self.control is not None:
            await self.control.stop()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.writer.touch(self._dirty_activity)
        try:
            await self.writer.close()
        finally:
            await self.calls.aclose()
            self.store.close()

    def _spawn(self, coro) -> None:  # type: ignore[no-untyped-def]
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # state ------------------------------------------------------------------------------------------
    def _hold_live(self, info: SandboxInfo) -> None:
        previous = self._live.get(info.id)
        if previous is not None and previous.worker_id != info.worker_id:
            self._on_worker.get(previous.worker_id, set()).discard(info.id)
        self._live[info.id] = info
        self._on_worker.setdefault(info.worker_id, set()).add(info.id)

    def _save(self, info: SandboxInfo) -> SandboxInfo:
        """Record `info` in memory now and queue its row (`await self.writer.flush()` to know it landed)."""
        self.writer.save(info, self._activity.get(info.id, time.time()))
        if info.state in LIVE:
            self._hold_live(info)
        else:
            previous = self._live.pop(info.id, None)
            if previous is not None:
                self._on_worker.get(previous.worker_id, set()).discard(info.id)
            self._activity.pop(info.id, None)
            self._dirty_activity.pop(info.id, None)
            self.scheduler.release(info.id)
        self.metrics.live.set(len(self._live))
        return info

    def _fail(self, info: SandboxInfo, reason: FailureReason, detail: str) -> SandboxInfo | None:
        """Move a live sandbox to failed; None when it had already stopped, failed or been deleted (the first
        outcome stands)."""
        current = self._live.get(info.id)
        if current is None:
            return None
        info = current
        log.warning("sandbox %s failed (%s): %s", info.id, reason.value, detail)
        self.metrics.failures.labels(reason.value).inc()
        failed = self._save(advance(info, S.FAILED, reason=reason, detail=detail))
        if info.worker_id in self.scheduler.workers:
            self._spawn(self._remove_container(info.worker_id, info.id))
        return failed

    async def _remove_container(self, worker_id: str, sandbox_id: str) -> None:
        """Free a failed sandbox's container now rather than at the worker's next heartbeat."""
        with contextlib.suppress(RockError):
            await self._send(worker_id, "DELETE", sandbox_path(sandbox_id), timeout=30.0)

    async def _failed(self, info: SandboxInfo, reason: FailureReason, detail: str) -> SandboxInfo:
        """`_fail`, or else the outcome recorded first."""
        return self._fail(info, reason, detail) or await self._recorded(info.id) or info

    async def _recorded(self, sandbox_id: str) -> SandboxInfo | None:
        info = self._live.get(sandbox_id) or self.writer.latest(sandbox_id)
        if info is None:
            row = await asyncio.to_thread(self.store.get, sandbox_id)
            info = None if row is None else row[0]
        return info

    async def get(self, sandbox_id: str, caller: KeyPolicy) -> SandboxInfo:
        info = await self._recorded(sandbox_id)
        if info is None or info.state is S.DELETED or not may_see(caller, info):
            raise SandboxNotFound(f"no sandbox {sandbox_id!r}; `rock sandbox ls` lists the ones that exist")
        return info

    async def list(self, caller: KeyPolicy, include_deleted: bool = False) -> list[SandboxInfo]:
        states = None if include_deleted else [s for s in S if s is not S.DELETED]
        await self.writer.flush()
        rows = await asyncio.to_thread(self.store.list, states)
        return [info for info, _ in rows if may_see(caller, info) and info.owner != POOL_OWNER]

    # create / delete --------------------------------------------------------------------------------
    async def create(
        self, request: CreateSandboxRequest, caller: KeyPolicy, gone: asyncio.Event | None = None
    ) -> SandboxInfo:
        """Admit, place and start a sandbox. `gone` is set when the caller disconnects: a create still
        waiting for room leaves the queue, and one already starting is removed once started."""
        spec = _spec_of(request)
        ((_, outcome),) = await self.creates.members(spec, 1, request.queue_timeout, caller, gone)
        if isinstance(outcome, RockError):
            raise outcome
        return outcome

    async def create_group(
        self, request: CreateGroupRequest, caller: KeyPolicy, gone: asyncio.Event | None = None
    ) -> GroupCreated:
        """`request.count` sandboxes of one spec, each admitted, placed and started on its own
        (rock.admin.creates); the answer lists every member, running or why not."""
        spec = _spec_of(request)
        self.metrics.groups.inc()
        self.metrics.group_size.observe(request.count)
        outcomes = await self.creates.members(spec, request.count, request.queue_timeout, caller, gone)
        members = [
            GroupMember(id=sid, sandbox=o)
            if isinstance(o, SandboxInfo)
            else GroupMember(id=sid, error=error_body(o))
            for sid, o in outcomes
        ]
        return GroupCreated(
            requested=request.count,
            running=sum(m.sandbox is not None for m in members),
            members=members,
            summary=group_summary(members),
        )

    async def delete(self, sandbox_id: str, caller: KeyPolicy) -> SandboxInfo:
        info = await self._stop(await self.get(sandbox_id, caller), detail="deleted by its owner")
        for state in path_to(info.state, S.DELETED):
            info = self._save(advance(info, state))
        await self.writer.flush()
        return info

    async def _stop(self, info: SandboxInfo, detail: str) -> SandboxInfo:
        """Remove the container of a live sandbox and move it to stopped (a no-op for the others)."""
        if info.state not in LIVE or info.id in self._stopping:
            return info
        self._stopping.add(info.id)
        try:
            if info.worker_id in self.scheduler.workers:
                with contextlib.suppress(SandboxNotFound, WorkerUnavailable):
                    await self._send(info.worker_id, "DELETE", sandbox_path(info.id), timeout=30.0)
            current = self._live.get(info.id, info)
            if current.state not in LIVE:
                return current
            return self._save(advance(current, S.STOPPED, detail=detail))
        finally:
            self._stopping.discard(info.id)

    # forwarding to the sandbox's worker -------------------------------------------------------------
    async def forward(
        self,
        sandbox_id: str,
        caller: KeyPolicy,
        method: str,
        op: str,
        *,
        timeout: float | None = 60.0,
        **kwargs: object,
    ) -> httpx.Response:
        info = await self.get(sandbox_id, caller)
        if info.state is S.FAILED:
            raise SandboxFailed(
                f"sandbox {sandbox_id} failed ({info.failure_reason}): {info.detail}", info.failure_reason
            )
        if info.state is not S.RUNNING or info.worker_id is None:
            raise SandboxNotRunning(
                f"sandbox {sandbox_id} is {info.state.value}, not running; create a new one"
            )
        self._touch(sandbox_id)
        self._in_flight[sandbox_id] = self._in_flight.get(sandbox_id, 0) + 1
        self.metrics.requests.labels(op.split("/")[0]).inc()
        try:
            return await self._send(
                info.worker_id, method, sandbox_path(sandbox_id, op), timeout=timeout, **kwargs
            )
        except SandboxFailed as exc:
            raise as_recorded(
                await self._failed(info, failure_reason_of(exc.reason), exc.message), exc
            ) from exc
        except SandboxNotFound as exc:
            failed = await self._failed(
                info, FailureReason.WORKER_LOST, "its worker no longer has this sandbox's container"
            )
            raise as_recorded(failed, SandboxFailed(exc.message, FailureReason.WORKER_LOST)) from exc
        finally:
            left = self._in_flight.pop(sandbox_id) - 1
            if left:
                self._in_flight[sandbox_id] = left
            if sandbox_id in self._activity:  # idle time counts from a command's end, not its start
                self._touch(sandbox_id)

    def _touch(self, sandbox_id: str) -> None:
        self._activity[sandbox_id] = self._dirty_activity[sandbox_id] = time.time()

    async def _send(
        self,
        worker_id: str,
        method: str,
        path: str,
        *,
        timeout: float | None,
        headers: dict[str, str] | None = None,
        stream: bool = False,
        **kwargs: object,
    ) -> httpx.Response:
        """The worker's answer; with `stream`, its body not read yet (the caller closes the response)."""
        worker = self.scheduler.workers.get(worker_id)
        if worker is None:
            raise WorkerUnavailable(f"worker {worker_id} is not connected; retry in a few seconds")
        try:
            response = await self.calls.send(
                worker_id, worker.url, method, path, timeout=timeout, headers=headers, stream=stream, **kwargs
            )
        except WorkerUnreachable:
            self.scheduler.mark_unreachable(worker_id)
            raise
        worker.last_answer = time.monotonic()
        return response

    # workers ----------------------------------------------------------------------------------------
    def heartbeat(self, beat: Heartbeat) -> HeartbeatReply:
        """A beat from a worker (the route has checked its worker credential)."""
        known = self.scheduler.workers.get(beat.worker_id)
        images = frozenset(beat.images) if beat.images is not None else known.images if known else None
        self.scheduler.upsert_worker(
            Worker(beat.worker_id, beat.url, beat.capacity, time.monotonic(), images=images)
        )
        if beat.sandboxes is None:
            return HeartbeatReply(remove=[], heartbeat_port=self.control_port)
        reported = {s.id: s for s in beat.sandboxes}
        for sandbox in reported.values():
            if sandbox.status == "running":  # nearly all of them: nothing to reconcile
                continue
            info = self._live.get(sandbox.id)
            if info is None or info.worker_id != beat.worker_id or info.state is not S.RUNNING:
                continue
            if sandbox.id in self._stopping:  # its container is being removed on purpose
                continue
            if sandbox.status == "oom_killed":
                self._fail(
                    info,
                    FailureReason.OOM_KILLED,
                    sandbox.detail or "the sandbox ran out of memory; create it with more memory",
                )
            elif sandbox.status == "exited":
                self._fail(info, FailureReason.EXITED, sandbox.detail or "the sandbox's container exited")
            elif sandbox.status in ("disk_quota", "socket_tampered"):
                self._fail(info, FailureReason(sandbox.status), sandbox.detail or sandbox.status)
        sure_listed = beat.listed_at - _CLOCK_SKEW  # a sandbox started before this must be in the list
        for info in [
            self._live[sid] for sid in self._on_worker.get(beat.worker_id, set()).difference(reported)
        ]:
            if (
                info.worker_id == beat.worker_id
                and info.state is S.RUNNING
                and info.id not in self._stopping
                and info.started_at is not None
                and info.started_at < sure_listed
            ):
                self._fail(
                    info,
                    FailureReason.WORKER_LOST,
                    f"its container is gone from worker {beat.worker_id} (removed outside ROCK, or the "
                    "worker restarted without it)",
                )
        unwanted = [sid for sid in reported if sid not in self._live]
        return HeartbeatReply(
            remove=unwanted + [sid for sid in beat.strays if sid not in self._live],
            heartbeat_port=self.control_port,
        )

    async def _probe(self, worker: Worker) -> None:
        """Ask a worker whose heartbeats and answers are late whether it runs; lose it if it does not answer.
        In a burst of creates its heartbeats may be waiting in this admin's own queue (up to 14 s measured
        with 1,000 creates in flight on a loaded machine), so silence alone does not prove it gone."""
        try:
            await self._send(worker.id, "GET", HEALTH_PATH, timeout=self.config.heartbeat_timeout)
        except WorkerUnavailable as exc:
            current = self.scheduler.workers.get(worker.id)
            if current is not None and time.monotonic() - current.last_heard > self.config.heartbeat_timeout:
                await self._lose(current, exc.message)
        except RockError:  # it answered, if with an error: it runs
            worker.last_answer = time.monotonic()
        finally:
            self._probing.discard(worker.id)

    async def _lose(self, worker: Worker, why: str) -> None:
        silent = time.monotonic() - worker.last_heard
        log.warning(
            "worker %s sent no heartbeat for %.0f s and does not answer (%s): lost", worker.id, silent, why
        )
        self.scheduler.remove_worker(worker.id)
        for info in [i for i in self._live.values() if i.worker_id == worker.id]:
            self._fail(info, FailureReason.WORKER_LOST, f"worker {worker.id} stopped sending heartbeats")
        await self.calls.forget(worker.id)

    async def _monitor(self) -> None:
        """Every reap_interval: flush activity times, drop silent workers, stop expired and idle sandboxes."""
        while True:
            await asyncio.sleep(self.config.reap_interval)
            try:
                self._check_once()
            except Exception:
                log.exception("the admin's monitor loop failed once; it keeps running")

    def _check_once(self) -> None:
        activity, self._dirty_activity = self._dirty_activity, {}
        self.writer.touch(activity)
        now_mono, now = time.monotonic(), time.time()
        for worker in list(self.scheduler.workers.values()):
            late = now_mono - worker.last_heard > self.config.heartbeat_timeout
            if late and worker.id not in self._probing:
                self._probing.add(worker.id)
                self._spawn(self._probe(worker))
        grace_over = now_mono - self._started > max(self.config.startup_grace, self.config.heartbeat_timeout)
        for info in list(self._live.values()):
            if info.worker_id not in self.scheduler.workers:
                if grace_over:
                    self._fail(
                        info,
                        FailureReason.WORKER_LOST,
                        f"worker {info.worker_id} has not sent a heartbeat since the admin started",
                    )
            elif info.state is S.RUNNING and info.expires_at and info.expires_at.timestamp() <= now:
                self._spawn(self._stop(info, f"its ttl of {info.spec.ttl:g} s ran out"))
            elif (
                info.state is S.RUNNING
                and info.owner != POOL_OWNER  # waiting in the warm pool is not idling
                and info.id not in self._in_flight
                and now - self._activity.get(info.id, now) > info.spec.idle_timeout
            ):
                self._spawn(self._stop(info, f"idle for more than {info.spec.idle_timeout:g} s"))
