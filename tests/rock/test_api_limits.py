"""Attacks on the admin's API that need no worker: limits switched off, unbounded numbers, NUL bytes, image
names pasted into paths, huge bodies, and queued creates whose client went away (issue 18, items 2, 6, 8,
10). Each answer must be a clear 4xx, never a 5xx and never a sandbox without limits."""

from __future__ import annotations

import json
import socket
import time

import httpx
import pytest
from pydantic import ValidationError

from rock.admin.config import KeyPolicy
from rock.sdk.checks import parse_memory
from rock.sdk.types import CreateSandboxRequest, ExecRequest, RunRequest, SandboxSpec, SessionRequest

KEY = "q" * 24


def _refused(response: httpx.Response, *needles: str) -> None:
    assert response.status_code == 422, (response.status_code, response.text[:300])
    body = response.json()
    assert body["type"] == "BadRequest"
    for needle in needles:
        assert needle in body["message"], body["message"]


@pytest.mark.parametrize("memory", ["0", "0.5", "0k", "5m", "0.0001g"])
def test_a_memory_limit_below_dockers_floor_is_refused_not_switched_off(admin_factory, memory):
    admin = admin_factory()
    response = httpx.post(f"{admin.url}/v1/sandboxes", json={"memory": memory, "queue_timeout": 0})
    _refused(response, f"memory {memory!r} is", "below the smallest limit Docker enforces (6m)")


def test_a_tiny_memory_cannot_dodge_a_memory_quota(admin_factory):
    admin = admin_factory(api_keys=[KeyPolicy(name="tight", key=KEY, max_memory="1g")])
    headers = {"Authorization": f"Bearer {KEY}"}
    response = httpx.post(
        f"{admin.url}/v1/sandboxes", json={"memory": "0k", "queue_timeout": 0}, headers=headers
    )
    _refused(response, "below the smallest limit")


def test_a_cpu_share_that_would_round_to_no_quota_is_refused(admin_factory):
    admin = admin_factory()
    for cpus in (1e-300, 0.001, 0.0099):
        response = httpx.post(f"{admin.url}/v1/sandboxes", json={"cpus": cpus, "queue_timeout": 0})
        _refused(response, "cpus: Input should be greater than or equal to 0.01")


def test_a_memory_of_400_digits_is_a_422_not_a_500(admin_factory):
    admin = admin_factory()
    response = httpx.post(f"{admin.url}/v1/sandboxes", json={"memory": "1" + "0" * 400})
    _refused(response, "memory: String should have at most 64 characters")
    response = httpx.post(f"{admin.url}/v1/sandboxes", json={"memory": "1" + "0" * 30 + "k"})
    _refused(response, "is not a size", "at most 18 digits")


def test_memory_sizes_are_exact():
    assert parse_memory("512m") == 512 * 1024**2
    assert parse_memory("1.5GiB") == 1536 * 1024**2
    assert parse_memory("0.5") == 0
    assert parse_memory("6m") == 6 * 1024**2
    assert parse_memory(" 2 kb ") == 2048
    assert parse_memory("999999999999999999t") == 999999999999999999 * 1024**4
    assert SandboxSpec(memory="6m").memory_bytes == 6 * 1024**2


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("cpus", "Infinity", "cpus: Input should be a finite number"),
        ("ttl", "1e308", "ttl: Input should be less than or equal to 2592000"),
        ("idle_timeout", "NaN", "idle_timeout: Input should be a finite number"),
        ("start_timeout", "1e7", "start_timeout: Input should be less than or equal to 3600"),
        ("queue_timeout", "1e300", "queue_timeout: Input should be less than or equal to 600"),
        ("pids", "100000000000", "pids: Input should be less than or equal to 4194304"),
    ],
)
def test_unbounded_numbers_in_a_create_are_422(admin_factory, field, value, needle):
    admin = admin_factory()
    response = httpx.post(
        f"{admin.url}/v1/sandboxes",
        content=f'{{"{field}": {value}}}',
        headers={"Content-Type": "application/json"},
    )
    _refused(response, needle)


@pytest.mark.parametrize(
    "image", ["../../etc/passwd", "python:3.11/../../../v1.41/containers/json", "Python", "a b", "x@sha256:1"]
)
def test_an_image_that_is_no_reference_is_refused_before_it_reaches_docker(admin_factory, image):
    admin = admin_factory()
    response = httpx.post(f"{admin.url}/v1/sandboxes", json={"image": image, "queue_timeout": 0})
    _refused(response, "is not an image reference")


@pytest.mark.parametrize(
    "image", ["python:3.11", "ale/debian:bookworm", "docker.io/library/busybox", f"a/b@sha256:{'0' * 64}"]
)
def test_image_references_of_the_grammar_pass(image):
    assert SandboxSpec(image=image).image == image


def test_timeouts_of_commands_are_finite_and_at_most_a_day():
    for text in ('{"cmd": "true", "timeout": Infinity}', '{"cmd": "true", "timeout": NaN}'):
        with pytest.raises(ValidationError, match="finite number"):
            RunRequest.model_validate_json(text)
    for timeout in (1e7, 1e308):
        with pytest.raises(ValidationError, match="less than or equal to 86400"):
            ExecRequest(cmd="true", timeout=timeout)
    assert RunRequest(cmd="true", timeout=86400).timeout == 86400


@pytest.mark.parametrize(
    ("route", "body"),
    [
        ("run", {"cmd": "echo a\x00b"}),
        ("exec", {"cmd": ["echo", "a\x00b"]}),
        ("exec", {"cmd": "env", "env": {"A": "x\x00y"}}),
        ("exec", {"cmd": "env", "env": {"A\x00B": "x"}}),
        ("exec", {"cmd": "env", "env": {"A=B": "x"}}),
        ("exec", {"cmd": "pwd", "cwd": "/tmp\x00/x"}),
        ("exec", {"cmd": []}),
        ("sessions", {"name": "a/b"}),
        ("forward", {"port": 0, "target_socket": "/run/rock/x\x00"}),
    ],
)
def test_nul_bytes_and_broken_argv_are_422_before_any_sandbox_is_looked_up(admin_factory, route, body):
    admin = admin_factory()
    response = httpx.post(f"{admin.url}/v1/sandboxes/nope/{route}", json=body)
    assert response.status_code == 422, response.text[:300]
    assert response.json()["type"] == "BadRequest"


def test_a_path_with_a_nul_byte_is_422(admin_factory):
    admin = admin_factory()
    for method, route, params in [
        ("GET", "files", {"path": "/etc/\x00passwd"}),
        ("PUT", "files", {"path": "/tmp/\x00"}),
        ("GET", "download", {"path": "\x00"}),
        ("POST", "upload", {"dest": "/tmp/\x00"}),
        ("GET", "files", {"path": ""}),
    ]:
        response = httpx.request(method, f"{admin.url}/v1/sandboxes/nope/{route}", params=params)
        assert response.status_code == 422, (route, response.text[:300])
        assert "path" in response.json()["message"] or "dest" in response.json()["message"]


def test_session_names_and_sandbox_specs_in_the_sdk_are_checked_too():
    with pytest.raises(ValidationError, match="NUL byte"):
        SessionRequest(name="ok", cwd="/\x00")
    with pytest.raises(ValidationError, match="queue_timeout"):
        CreateSandboxRequest(queue_timeout=1e300)


def test_a_10_mb_json_body_is_413_before_it_is_parsed(admin_factory):
    admin = admin_factory()
    big = json.dumps({"cmd": "x" * (10 * 1024 * 1024)})
    response = httpx.post(f"{admin.url}/v1/sandboxes/nope/run", content=big, timeout=30)
    assert response.status_code == 413, response.text[:300]
    body = response.json()
    assert body["type"] == "PayloadTooLarge" and "at most 1048576 bytes" in body["message"]


def test_a_chunked_json_body_over_the_limit_is_413(admin_factory):
    admin = admin_factory()

    def chunks():
        yield b'{"cmd": "'
        for _ in range(40):
            yield b"x" * 65536
        yield b'"}'

    response = httpx.post(f"{admin.url}/v1/sandboxes/nope/exec", content=chunks(), timeout=30)
    assert response.status_code == 413, response.text[:300]


def _waiting(url: str) -> float:
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line.startswith("rock_admission_waiting "):
            return float(line.split()[1])
    raise AssertionError("no rock_admission_waiting metric")


def test_a_queued_create_leaves_the_queue_when_its_client_disconnects(admin_factory):
    admin = admin_factory()
    body = json.dumps({"queue_timeout": 600}).encode()
    host, port = admin.config.host, admin.config.port
    with socket.create_connection((host, port), timeout=10) as conn:
        conn.sendall(
            b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        deadline = time.monotonic() + 10
        while _waiting(admin.url) != 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _waiting(admin.url) == 1
    deadline = time.monotonic() + 10
    while _waiting(admin.url) != 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _waiting(admin.url) == 0, "the create of a client that went away still waits for room"
    text = httpx.get(f"{admin.url}/metrics").text
    assert 'rock_sandbox_creates_total{outcome="abandoned"} 1.0' in text


def test_the_cli_refuses_an_unbounded_timeout_with_a_message_not_a_traceback():
    from typer.testing import CliRunner

    from rock.cli import app

    result = CliRunner().invoke(app, ["sandbox", "exec", "nope", "--timeout", "1e7", "--", "true"])
    assert result.exit_code == 2
    assert "less than or equal to 86400" in result.output and "Traceback" not in result.output
