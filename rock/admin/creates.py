"""Creating sandboxes: one, or a group of N of one spec in one request (the same path: a create is a group
of one).

Every member of a group is admitted (its owner's quota), placed and started on its own, so a group can
end partly running. Placement decides at once for every member that fits now, and each worker then gets one
call for its whole share (the contract's GROUP_PATH) instead of one per sandbox, shared with the other
creates placed on it within a few milliseconds (rock.admin.shares). Members that find no room queue like
single creates (behind the creates already waiting) and start on their own once placed. The store is
flushed once for the whole group before it is answered.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from rock.admin.auth import LOCAL, check_quota
from rock.admin.scheduler import ClientGone, Demand, demand_of
from rock.admin.shares import Shares
from rock.admin.states import advance, failure_reason_of
from rock.admin.warm import pool_label_ttl
from rock.admin.writer import StoreFailed
from rock.images.build import SANDBOX_BUILD_TIMEOUT
from rock.sdk.calls import member_error
from rock.sdk.errors import RockError, SandboxFailed, WorkerUnavailable
from rock.sdk.types import ErrorBody, FailureReason, GroupMember, SandboxInfo, SandboxSpec, SandboxState
from rock.worker.contract import GROUP_PATH, CreatedOnWorker, CreatedShare, CreateOnWorker, CreateShare

if TYPE_CHECKING:
    from rock.admin.config import KeyPolicy
    from rock.admin.service import Admin

S = SandboxState
Outcome = tuple[str, SandboxInfo | RockError]
"""(metrics outcome: running, refused, failed or abandoned; the running sandbox or why it is not)."""
_JSON = {"Content-Type": "application/json"}
_PER_MEMBER = 1.0
"""Seconds a worker's share may take beyond one create's bound, per sandbox in it: the worker starts them
all at once, but Docker creates containers a few at a time."""


def error_body(exc: RockError) -> ErrorBody:
    return ErrorBody(
        type=type(exc).__name__,
        message=exc.message,
        reason=getattr(exc, "reason", None),
        retry_after=getattr(exc, "retry_after", None),
    )


def group_summary(members: list[GroupMember]) -> str:
    """`8 of 8 sandboxes running`, or with the failures counted by kind and the first of each kind quoted."""
    running = sum(m.sandbox is not None for m in members)
    line = f"{running} of {len(members)} sandboxes running"
    kinds: dict[str, tuple[int, str]] = {}
    for member in members:
        if member.error is not None:
            kind = member.error.type + (f" ({member.error.reason})" if member.error.reason else "")
            count, first = kinds.get(kind, (0, member.error.message))
            kinds[kind] = (count + 1, first)
    if not kinds:
        return line
    failed = "; ".join(f"{count} {kind}, e.g. {first}" for kind, (count, first) in kinds.items())
    return f"{line}; {len(members) - running} not: {failed}"


class Creates:
    def __init__(self, admin: Admin) -> None:
        self.admin = admin
        self.shares = Shares(self._start_share, admin._spawn)

    async def members(
        self,
        spec: SandboxSpec,
        count: int,
        queue_timeout: float,
        caller: KeyPolicy,
        gone: asyncio.Event | None = None,
    ) -> list[tuple[str, SandboxInfo | RockError]]:
        """Create `count` sandboxes of `spec`: (id, running sandbox or its error) each, in order. Raises only
        for what refuses the whole group (a spec over the limits, one no worker could ever hold)."""
        admin = self.admin
        admin.config.limits.check(spec)
        demand = demand_of(spec)
        admin.scheduler.check_possible(demand)
        began = time.monotonic()
        deadline = began + queue_timeout
        prefer = None if spec.build_context else admin.images.holders(spec.image)
        ids: list[str] = []
        outcomes: dict[str, Outcome] = {}
        shares: dict[str, list[SandboxInfo]] = {}
        queued: list[str] = []
        worker_id: str | None = None
        for _ in range(count):
            sandbox_id = secrets.token_hex(6)
            ids.append(sandbox_id)
            held, cpus, memory = admin.scheduler.usage(caller.name)
            ahead = len(queued)  # members about to queue count against the quota too
            usage = (held + ahead, cpus + ahead * demand.cpus, memory + ahead * demand.memory)
            try:
                check_quota(caller, usage, demand)
            except RockError as exc:
                outcomes[sandbox_id] = ("refused", exc)
                continue
            warm = admin.pool.take(spec, caller) if admin.pool is not None else None
            if warm is not None:  # started already: nothing to place or start
                ids[-1] = warm.id
                outcomes[warm.id] = ("running", warm)
                continue
            # A group packs onto the worker of its previous member while that one has room, and its first
            # member (a single create too) onto a worker whose share is being gathered: one call per worker
            # is then one call for most of a group, and for many creates of a burst (spread, a group of 8
            # was 8 calls of one).
            last = {worker_id} if worker_id else self.shares.gathering(spec)
            worker_id = admin.scheduler.place_now(sandbox_id, demand, caller.name, (last, prefer))
            if worker_id is None:
                queued.append(sandbox_id)
            else:
                shares.setdefault(worker_id, []).append(self._pending(sandbox_id, spec, caller, worker_id))
        jobs = [self.shares.start(worker_id, infos, deadline) for worker_id, infos in shares.items()]
        # Queued members wait the whole queue_timeout: placing the others took no time (no await so far).
        jobs += [self._start_queued(sid, spec, demand, caller, queue_timeout, gone) for sid in queued]
        for done in await asyncio.gather(*jobs):
            outcomes.update(done)
        await self._commit(outcomes, gone)
        for outcome, _ in outcomes.values():
            admin.metrics.creates.labels(outcome).inc()
            if outcome == "running":
                admin.metrics.create_seconds.observe(time.monotonic() - began)
        return [(sandbox_id, outcomes[sandbox_id][1]) for sandbox_id in ids]

    async def _commit(self, outcomes: dict[str, Outcome], gone: asyncio.Event | None) -> None:
        """Answer only once the running members' rows are committed; a client that left has them removed."""
        running = [value for outcome, value in outcomes.values() if outcome == "running"]
        if not running:
            return
        try:
            await self.admin.writer.flush()
        except StoreFailed as exc:
            for info in running:
                assert isinstance(info, SandboxInfo)
                self.admin._fail(info, FailureReason.START_ERROR, exc.message)
                outcomes[info.id] = ("failed", exc)
            return
        if gone is not None and gone.is_set():
            for info in running:
                assert isinstance(info, SandboxInfo)
                await self.admin.delete(info.id, LOCAL)
                outcomes[info.id] = (
                    "abandoned",
                    ClientGone(f"the client of create {info.id} disconnected while it started; removed it"),
                )

    def _pending(self, sandbox_id: str, spec: SandboxSpec, caller: KeyPolicy, worker_id: str) -> SandboxInfo:
        info = SandboxInfo(
            id=sandbox_id,
            state=S.PENDING,
            spec=spec,
            owner=caller.name,
            worker_id=worker_id,
            created_at=datetime.now(UTC),
        )
        self.admin._activity[sandbox_id] = time.time()
        return self.admin._save(info)

    async def _start_queued(
        self,
        sandbox_id: str,
        spec: SandboxSpec,
        demand: Demand,
        caller: KeyPolicy,
        wait: float,
        gone: asyncio.Event | None,
    ) -> dict[str, Outcome]:
        deadline = time.monotonic() + wait
        try:
            worker_id = await self.admin.scheduler.reserve(sandbox_id, demand, caller.name, wait, gone)
        except ClientGone as exc:
            return {sandbox_id: ("abandoned", exc)}
        except RockError as exc:
            return {sandbox_id: ("refused", exc)}
        return await self.shares.start(
            worker_id, [self._pending(sandbox_id, spec, caller, worker_id)], deadline
        )

    async def _start_share(
        self, worker_id: str, infos: list[SandboxInfo], deadline: float
    ) -> dict[str, Outcome]:
        """Start a worker's share in one call. A worker that cannot be connected to has started none of it:
        each member is then placed again on its own (within the create's queue_timeout)."""
        try:
            started = await self._share_call(worker_id, infos)
        except WorkerUnavailable as exc:
            if worker_id not in self.admin.scheduler.unreachable:
                started = dict.fromkeys((info.id for info in infos), exc)
            else:
                again = await asyncio.gather(
                    *(self._start_elsewhere(info, deadline) for info in infos), return_exceptions=True
                )
                started = {info.id: result for info, result in zip(infos, again, strict=True)}  # type: ignore[misc]
        except RockError as exc:
            started = dict.fromkeys((info.id for info in infos), exc)
        return {info.id: self._finish(info, started[info.id]) for info in infos}

    async def _share_call(
        self, worker_id: str, infos: list[SandboxInfo]
    ) -> dict[str, CreatedOnWorker | RockError]:
        spec = infos[0].spec
        if not spec.build_context:
            await self.admin.images.ensure(worker_id, spec.image)
        body = CreateShare(
            sandboxes=[
                CreateOnWorker(id=info.id, spec=info.spec, owner=info.owner, label_ttl=pool_label_ttl(info))
                for info in infos
            ]
        )
        response = await self.admin._send(
            worker_id,
            "POST",
            GROUP_PATH,
            content=body.model_dump_json(),
            headers=_JSON,
            # A build (its worker cuts it off at SANDBOX_BUILD_TIMEOUT) comes before the start.
            timeout=spec.start_timeout
            + 30.0
            + _PER_MEMBER * len(infos)
            + (SANDBOX_BUILD_TIMEOUT if spec.build_context else 0.0),
        )
        reply = CreatedShare.model_validate_json(response.content)
        out: dict[str, CreatedOnWorker | RockError] = {
            info.id: WorkerUnavailable(f"worker {worker_id} did not report on sandbox {info.id}")
            for info in infos
        }
        for member in reply.members:
            if member.id not in out:
                continue
            if member.error is not None:
                out[member.id] = member_error(member.error)
            elif member.host_dir is not None:
                out[member.id] = CreatedOnWorker(host_dir=member.host_dir)
        return out

    async def _start_elsewhere(self, info: SandboxInfo, deadline: float) -> CreatedOnWorker:
        """Place a sandbox whose worker was unreachable again and start it there, as long as the deadline
        allows (the unreachable worker gets no placements until it heartbeats again)."""
        admin = self.admin
        while True:
            if info.id not in admin._live:
                raise SandboxFailed(
                    f"sandbox {info.id} ended while it was placed again", FailureReason.START_ERROR
                )
            admin.scheduler.release(info.id)
            wait = max(deadline - time.monotonic(), 0.0)
            worker_id = await admin.scheduler.reserve(info.id, demand_of(info.spec), info.owner, wait)
            info = admin._save(info.model_copy(update={"worker_id": worker_id}))
            try:
                result = (await self._share_call(worker_id, [info]))[info.id]
            except WorkerUnavailable:
                if worker_id not in admin.scheduler.unreachable:
                    raise
                continue
            if isinstance(result, RockError):
                raise result
            return result

    def _finish(self, info: SandboxInfo, result: CreatedOnWorker | BaseException) -> Outcome:
        """Record a member's start: running, or failed with the worker's reason."""
        admin = self.admin
        if isinstance(result, BaseException):
            if isinstance(result, SandboxFailed):
                failure = result
            else:
                message = result.message if isinstance(result, RockError) else repr(result)
                failure = SandboxFailed(message, FailureReason.START_ERROR)
            admin._fail(info, failure_reason_of(failure.reason), failure.message)
            return ("failed", failure)
        current = admin._live.get(info.id)
        if current is None:  # deleted, or failed (its worker lost, say) while it started
            final = admin.writer.latest(info.id) or info
            return (
                "failed",
                SandboxFailed(
                    f"sandbox {info.id} ended while it started ({final.state.value}): {final.detail}",
                    final.failure_reason or FailureReason.START_ERROR,
                ),
            )
        started = datetime.now(UTC)
        running = advance(
            current.model_copy(
                update={
                    "host_dir": result.host_dir,
                    "expires_at": started + timedelta(seconds=current.spec.ttl),
                }
            ),
            S.RUNNING,
            now=started,
        )
        return ("running", admin._save(running))
