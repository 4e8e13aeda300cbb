"""Worker routes take the fleet's worker credential only: a tenant's API key cannot pose as a worker.

Each attack is the one issue 18 found: a user key heartbeating a real worker's id with its own URL (to
receive other tenants' commands), an empty `sandboxes` list (to fail them), and a fake worker with a huge
capacity (to capture creates).
"""

from datetime import UTC, datetime

import httpx
import pytest

from rock.admin.config import KeyPolicy
from rock.worker.contract import Heartbeat, WorkerCapacity

USER_KEY = "u" * 24
WORKER_TOKEN = "w" * 32
HUGE = WorkerCapacity(cpus=1e6, memory=2**50, slots=10**6)


def beat(worker_id: str, url: str, capacity: WorkerCapacity = HUGE, sandboxes: list | None = None) -> dict:
    return Heartbeat(
        worker_id=worker_id, listed_at=datetime.now(UTC), url=url, capacity=capacity, sandboxes=sandboxes
    ).model_dump(mode="json")


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


@pytest.fixture
def keyed_admin(admin_factory):
    return admin_factory(api_keys=[KeyPolicy(name="tenant", key=USER_KEY)], worker_token=WORKER_TOKEN)


def workers(admin) -> list[dict]:
    return httpx.get(f"{admin.url}/v1/workers", headers=bearer(USER_KEY)).json()


def test_a_user_key_cannot_take_over_a_real_workers_id(keyed_admin):
    real = httpx.post(
        f"{keyed_admin.url}/v1/workers/heartbeat",
        json=beat("node-1", "http://127.0.0.1:9", WorkerCapacity(cpus=4, memory=2**30, slots=4)),
        headers=bearer(WORKER_TOKEN),
    )
    assert real.status_code == 200
    forged = httpx.post(
        f"{keyed_admin.url}/v1/workers/heartbeat",
        json=beat("node-1", "http://127.0.0.1:6666"),
        headers=bearer(USER_KEY),
    )
    assert forged.status_code == 403 and forged.json()["type"] == "Forbidden"
    assert "worker credential" in forged.json()["message"]
    assert [(w["id"], w["url"]) for w in workers(keyed_admin)] == [("node-1", "http://127.0.0.1:9")]


def test_an_empty_sandbox_list_from_a_user_key_is_refused(keyed_admin):
    response = httpx.post(
        f"{keyed_admin.url}/v1/workers/heartbeat",
        json=beat("node-1", "http://127.0.0.1:9", sandboxes=[]),
        headers=bearer(USER_KEY),
    )
    assert response.status_code == 403
    assert workers(keyed_admin) == []


def test_a_fake_worker_cannot_capture_creates(keyed_admin):
    for headers in ({}, bearer(USER_KEY), bearer("x" * 32), {"Authorization": WORKER_TOKEN}):
        response = httpx.post(
            f"{keyed_admin.url}/v1/workers/heartbeat",
            json=beat("fake", "http://127.0.0.1:6666"),
            headers=headers,
        )
        assert response.status_code in (401, 403), headers
    create = httpx.post(
        f"{keyed_admin.url}/v1/sandboxes", json={"queue_timeout": 0.2}, headers=bearer(USER_KEY), timeout=10
    )
    assert create.status_code == 429
    assert workers(keyed_admin) == []


def test_a_keyless_loopback_admin_still_demands_the_worker_credential(admin_factory):
    admin = admin_factory(worker_token=WORKER_TOKEN)
    refused = httpx.post(f"{admin.url}/v1/workers/heartbeat", json=beat("fake", "http://127.0.0.1:6666"))
    assert refused.status_code == 401 and "worker credential" in refused.json()["message"]
    accepted = httpx.post(
        f"{admin.url}/v1/workers/heartbeat",
        json=beat("node-1", "http://127.0.0.1:9"),
        headers=bearer(WORKER_TOKEN),
    )
    assert accepted.status_code == 200 and accepted.json()["remove"] == []


def test_a_loopback_worker_answers_only_its_credential(tmp_path):
    from fastapi.testclient import TestClient

    from rock.worker.app import create_worker_app
    from rock.worker.config import WorkerConfig
    from rock.worker.service import WorkerService

    worker = WorkerService(WorkerConfig(state_dir=tmp_path, token=WORKER_TOKEN))
    client = TestClient(create_worker_app(worker, lambda: 0, manage_lifespan=False))
    for headers in ({}, bearer(USER_KEY), bearer(WORKER_TOKEN[:-1])):
        response = client.get("/v1/sandboxes", headers=headers)
        assert response.status_code == 401 and "worker credential" in response.json()["message"]
    assert client.get("/health", headers=bearer(WORKER_TOKEN)).json()["status"] == "ok"


def test_the_admin_makes_one_owner_only_worker_token_in_its_state_folder(tmp_path):
    from rock.admin.auth import worker_token
    from rock.admin.config import AdminConfig

    config = AdminConfig(state_dir=tmp_path)
    token = worker_token(config)
    assert len(token) >= 32 and worker_token(config) == token
    assert (tmp_path / "worker.token").stat().st_mode & 0o777 == 0o600
    assert worker_token(AdminConfig(state_dir=tmp_path, worker_token=WORKER_TOKEN)) == WORKER_TOKEN
    with pytest.raises(ValueError, match="at least 16"):
        AdminConfig(state_dir=tmp_path, worker_token="short")
