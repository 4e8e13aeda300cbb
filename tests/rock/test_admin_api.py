"""The admin's API without any worker: errors, limits, admission queue, quotas, auth, metrics."""

import httpx
import pytest

from rock.admin.config import AdminConfig, KeyPolicy
from rock.admin.service import Admin
from rock.sdk import calls
from rock.sdk.errors import BadRequest, CapacityExceeded, QuotaExceeded, SandboxNotFound, Unauthorized
from rock.sdk.sandbox import Sandbox
from rock.sdk.types import CreateSandboxRequest

KEY = "k" * 24


def test_unknown_sandbox_is_404(admin_factory):
    admin = admin_factory()
    with pytest.raises(SandboxNotFound, match="no sandbox 'nope'"):
        Sandbox.attach("nope", admin_url=admin.url)
    response = httpx.delete(f"{admin.url}/v1/sandboxes/nope")
    assert response.status_code == 404 and response.json()["type"] == "SandboxNotFound"


def test_a_spec_over_the_limits_is_422_naming_the_limit(admin_factory):
    admin = admin_factory()
    with pytest.raises(BadRequest, match=r"cpus=64.0 is over this admin.s limit max_cpus=8.0"):
        Sandbox(admin_url=admin.url, cpus=64)
    response = httpx.post(f"{admin.url}/v1/sandboxes", json={"memory": "lots"})
    assert response.status_code == 422
    assert "memory: Value error, memory 'lots' is not a size" in response.json()["message"]
    response = httpx.post(f"{admin.url}/v1/sandboxes", json={"colour": "red"})
    assert (
        response.status_code == 422 and "colour: Extra inputs are not permitted" in response.json()["message"]
    )


def test_a_create_with_no_room_waits_then_gets_429_with_retry_after(admin_factory):
    admin = admin_factory()
    response = httpx.post(f"{admin.url}/v1/sandboxes", json={"queue_timeout": 0.2}, timeout=10)
    assert response.status_code == 429
    assert response.headers["Retry-After"] == "5"
    assert "within 0.2 s" in response.json()["message"]
    with pytest.raises(CapacityExceeded) as caught:
        Sandbox(admin_url=admin.url, queue_timeout=0.1)
    assert caught.value.retry_after == 5


def test_a_full_queue_refuses_at_once(admin_factory):
    admin = admin_factory(max_waiting=0)
    with pytest.raises(CapacityExceeded, match="0 creates already wait"):
        Sandbox(admin_url=admin.url, queue_timeout=30)


def test_quota_per_key(admin_factory):
    keys = [
        KeyPolicy(name="tight", key=KEY, max_sandboxes=0),
        KeyPolicy(name="cpu", key="c" * 24, max_cpus=1),
    ]
    admin = admin_factory(api_keys=keys)
    with pytest.raises(QuotaExceeded, match="key 'tight' already holds 0 sandboxes \\(quota 0\\)"):
        Sandbox(admin_url=admin.url, api_key=KEY)
    with pytest.raises(QuotaExceeded, match="key 'cpu' would hold 2 CPUs \\(quota 1\\)"):
        Sandbox(admin_url=admin.url, api_key="c" * 24, cpus=2)


def test_an_admin_beyond_127_0_0_1_refuses_requests_without_its_key(admin_factory):
    admin = admin_factory(host="127.0.0.2", api_keys=[KeyPolicy(name="default", key=KEY)])
    for headers in ({}, {"Authorization": "Bearer wrong-key-wrong-key"}, {"Authorization": KEY}):
        response = httpx.get(f"{admin.url}/v1/sandboxes", headers=headers)
        assert response.status_code == 401, headers
        assert response.json()["type"] == "Unauthorized"
    assert httpx.get(f"{admin.url}/metrics").status_code == 401
    with pytest.raises(Unauthorized, match="Authorization: Bearer KEY"):
        Sandbox(admin_url=admin.url)
    ok = httpx.get(f"{admin.url}/v1/sandboxes", headers={"Authorization": f"Bearer {KEY}"})
    assert ok.status_code == 200 and ok.json() == []


def test_binding_beyond_127_0_0_1_without_a_key_is_refused(tmp_path):
    with pytest.raises(ValueError, match="needs an API key"):
        Admin(AdminConfig(host="127.0.0.2", state_dir=tmp_path))


def test_metrics_are_prometheus_text(admin_factory):
    admin = admin_factory()
    httpx.post(f"{admin.url}/v1/sandboxes", json={"queue_timeout": 0}, timeout=10)
    text = httpx.get(f"{admin.url}/metrics").text
    assert "rock_admission_waiting 0.0" in text
    assert 'rock_sandbox_creates_total{outcome="refused"} 1.0' in text


def test_create_call_times_out_after_queue_and_start():
    call = calls.create(CreateSandboxRequest(queue_timeout=10, start_timeout=20))
    assert call.timeout == 10 + 20 + calls.SLACK


def test_an_egress_allowlist_needs_bridge_and_real_networks(admin_factory):
    admin = admin_factory()
    response = httpx.post(f"{admin.url}/v1/sandboxes", json={"egress": ["10.0.0.0/8"]})
    assert response.status_code == 422 and "set network='bridge' too" in response.json()["message"]
    response = httpx.post(f"{admin.url}/v1/sandboxes", json={"network": "bridge", "egress": ["example.com"]})
    assert (
        response.status_code == 422 and "'example.com' is not an IPv4 network" in response.json()["message"]
    )


def test_env_routes_on_a_keyed_admin_need_its_key(tmp_path):
    from fastapi.testclient import TestClient

    from rock.admin.app import create_app

    config = AdminConfig(state_dir=tmp_path, api_keys=[KeyPolicy(name="default", key=KEY)])
    with TestClient(create_app(Admin(config), envs_admin_url="http://127.0.0.1:1")) as client:
        refused = client.get("/envs/list")
        assert refused.status_code == 401 and refused.json()["type"] == "Unauthorized"
        listed = client.get("/envs/list", headers={"Authorization": f"Bearer {KEY}"})
        assert listed.status_code == 200 and listed.json()["open"] == []
        assert "game:Sudoku-v0-easy" in listed.json()["registered"]
