"""The sandbox state machine: pending → running → stopped → deleted, and failed (with a reason)."""

from __future__ import annotations

from datetime import UTC, datetime

from rock.sdk.errors import SandboxFailed
from rock.sdk.types import FailureReason, SandboxInfo, SandboxState

S = SandboxState

ALLOWED: dict[SandboxState, frozenset[SandboxState]] = {
    S.PENDING: frozenset({S.RUNNING, S.FAILED, S.STOPPED}),
    S.RUNNING: frozenset({S.STOPPED, S.FAILED}),
    S.STOPPED: frozenset({S.DELETED}),
    S.FAILED: frozenset({S.DELETED}),
    S.DELETED: frozenset(),
}

LIVE = frozenset({S.PENDING, S.RUNNING})
"""States that hold a container (or are about to) and so count against a worker's room."""


class InvalidTransition(ValueError):
    pass


def advance(
    info: SandboxInfo,
    target: SandboxState,
    *,
    reason: FailureReason | None = None,
    detail: str | None = None,
    now: datetime | None = None,
) -> SandboxInfo:
    """A copy of `info` in state `target`, with its timestamps and failure reason set.

    Raises InvalidTransition for a move the machine does not allow (e.g. stopped → running).
    """
    if target not in ALLOWED[info.state]:
        raise InvalidTransition(f"a sandbox cannot go from {info.state.value} to {target.value}")
    if (target is S.FAILED) != (reason is not None):
        raise ValueError("a failure reason is given exactly when the target state is failed")
    now = now or datetime.now(UTC)
    update: dict[str, object] = {"state": target}
    if target is S.RUNNING:
        update["started_at"] = now
    if target in (S.STOPPED, S.FAILED):
        update["stopped_at"] = now
    if reason is not None:
        update["failure_reason"] = reason
    if detail is not None:
        update["detail"] = detail
    return info.model_copy(update=update)


def path_to(current: SandboxState, target: SandboxState) -> list[SandboxState]:
    """The shortest list of states that leads from `current` to `target` (excluding `current`).

    Used by delete: a running sandbox is stopped first, then deleted. Raises InvalidTransition if no path.
    """
    frontier: list[list[SandboxState]] = [[current]]
    seen = {current}
    while frontier:
        route = frontier.pop(0)
        if route[-1] is target:
            return route[1:]
        for nxt in sorted(ALLOWED[route[-1]] - {S.FAILED}):
            if nxt not in seen:
                seen.add(nxt)
                frontier.append([*route, nxt])
    raise InvalidTransition(f"a sandbox cannot go from {current.value} to {target.value}")


def as_recorded(failed: SandboxInfo, seen: SandboxFailed) -> SandboxFailed:
    """The failure the store holds (a heartbeat may have recorded why before this call saw the end), so the
    caller and `rock sandbox ls` give the same reason."""
    if failed.state is not S.FAILED or failed.failure_reason is None:
        return seen
    return SandboxFailed(failed.detail or seen.message, failed.failure_reason)


def failure_reason_of(reason: object) -> FailureReason:
    """A worker's failure reason as ours; one we do not know is a start error."""
    try:
        return FailureReason(str(reason))
    except ValueError:
        return FailureReason.START_ERROR
