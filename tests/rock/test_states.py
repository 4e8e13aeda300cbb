from datetime import UTC, datetime

import pytest

from rock.admin.states import ALLOWED, InvalidTransition, advance, path_to
from rock.sdk.types import FailureReason, SandboxInfo, SandboxSpec, SandboxState

S = SandboxState


def _info(state: SandboxState) -> SandboxInfo:
    return SandboxInfo(id="abc", state=state, spec=SandboxSpec(), owner="me", created_at=datetime.now(UTC))


def test_the_happy_path_sets_timestamps():
    t1, t2 = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC)
    running = advance(_info(S.PENDING), S.RUNNING, now=t1)
    stopped = advance(running, S.STOPPED, detail="ttl", now=t2)
    deleted = advance(stopped, S.DELETED)
    assert (running.started_at, stopped.stopped_at, stopped.detail) == (t1, t2, "ttl")
    assert deleted.state is S.DELETED and deleted.started_at == t1


def test_failed_carries_its_reason():
    failed = advance(_info(S.RUNNING), S.FAILED, reason=FailureReason.OOM_KILLED, detail="out of memory")
    assert failed.failure_reason is FailureReason.OOM_KILLED and failed.stopped_at is not None
    with pytest.raises(ValueError, match="failure reason"):
        advance(_info(S.RUNNING), S.FAILED)
    with pytest.raises(ValueError, match="failure reason"):
        advance(_info(S.RUNNING), S.STOPPED, reason=FailureReason.EXITED)


@pytest.mark.parametrize(
    ("current", "target"),
    [
        (S.STOPPED, S.RUNNING),
        (S.DELETED, S.PENDING),
        (S.FAILED, S.RUNNING),
        (S.RUNNING, S.PENDING),
        (S.PENDING, S.DELETED),
        (S.RUNNING, S.DELETED),
    ],
)
def test_forbidden_moves_raise(current, target):
    with pytest.raises(InvalidTransition, match=f"from {current.value} to {target.value}"):
        advance(_info(current), target)


def test_every_state_reaches_deleted_except_through_failed():
    assert path_to(S.RUNNING, S.DELETED) == [S.STOPPED, S.DELETED]
    assert path_to(S.PENDING, S.DELETED) == [S.STOPPED, S.DELETED]
    assert path_to(S.FAILED, S.DELETED) == [S.DELETED]
    assert path_to(S.DELETED, S.DELETED) == []
    with pytest.raises(InvalidTransition):
        path_to(S.STOPPED, S.RUNNING)


def test_deleted_is_terminal():
    assert ALLOWED[S.DELETED] == frozenset()
