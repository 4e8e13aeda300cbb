from datetime import UTC, datetime

from rock.admin.states import advance
from rock.admin.store import SandboxStore
from rock.sdk.types import SandboxInfo, SandboxSpec, SandboxState


def _info(sandbox_id: str, state: SandboxState = SandboxState.PENDING) -> SandboxInfo:
    return SandboxInfo(
        id=sandbox_id,
        state=state,
        spec=SandboxSpec(image="busybox", memory="1g"),
        owner="me",
        worker_id="w1",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
    )


def test_rows_survive_a_new_store_on_the_same_database(database_url):
    url = database_url
    store = SandboxStore(url)
    running = advance(_info("a"), SandboxState.RUNNING)
    store.save(running, last_activity=10.0)
    store.save(_info("b"), last_activity=20.0)
    store.save(
        advance(advance(_info("c", SandboxState.RUNNING), SandboxState.STOPPED), SandboxState.DELETED), 0
    )
    store.close()

    reopened = SandboxStore(url)
    assert reopened.get("a") == (running, 10.0)
    assert reopened.get("zzz") is None
    live = reopened.list([SandboxState.PENDING, SandboxState.RUNNING])
    assert [(info.id, info.state) for info, _ in live] == [
        ("a", SandboxState.RUNNING),
        ("b", SandboxState.PENDING),
    ]
    assert len(reopened.list()) == 3
    reopened.touch({"a": 50.0, "b": 5.0, "gone": 1.0})
    assert reopened.get("a")[1] == 50.0 and reopened.get("b")[1] == 20.0  # never moves backwards
    assert reopened.get("a")[0].spec.memory_bytes == 1024**3
