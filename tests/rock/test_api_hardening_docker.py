"""Issue 18's API attacks against a real fleet (admin, local worker, Docker): bad input reaches no 5xx,
endless reads and big uploads exhaust nothing, and a create whose client left makes no sandbox."""

from __future__ import annotations

import json
import socket
import tarfile
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rock.fleet import LocalFleet
from rock.sdk.errors import SandboxRequestError
from rock.sdk.sandbox import AsyncSandbox, Sandbox

pytestmark = pytest.mark.docker
MIB = 1024 * 1024
UPLOAD = 256 * MIB
SMALL = {"cpus": 0.25, "memory": "128m"}


@pytest.fixture(scope="module")
def sandbox(fleet: LocalFleet) -> Iterator[Sandbox]:
    with Sandbox("python:3.11", admin_url=fleet.url, user="root", **SMALL) as sandbox:
        yield sandbox


def _peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def test_read_file_of_dev_zero_is_a_clear_error_and_the_sandbox_lives(sandbox: Sandbox):
    with pytest.raises(SandboxRequestError, match="/dev/zero is not a regular file"):
        sandbox.read_file("/dev/zero")
    assert sandbox.run("echo alive").output.strip() == "alive"
    assert sandbox.refresh().state == "running"


@pytest.mark.parametrize(
    ("route", "body"),
    [
        ("exec", '{"cmd": ["echo", "a\\u0000b"]}'),
        ("exec", '{"cmd": "env", "env": {"A": "x\\u0000"}}'),
        ("exec", '{"cmd": "true", "timeout": 1e7}'),
        ("run", '{"cmd": "true", "timeout": 1e308}'),
        ("run", '{"cmd": "true", "timeout": Infinity}'),
    ],
)
def test_bad_commands_to_a_running_sandbox_are_422(
    fleet: LocalFleet, sandbox: Sandbox, route: str, body: str
):
    response = httpx.post(
        f"{fleet.url}/v1/sandboxes/{sandbox.id}/{route}",
        content=body,
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    assert response.status_code == 422, response.text[:300]


def test_a_path_with_a_nul_byte_to_a_running_sandbox_is_422(fleet: LocalFleet, sandbox: Sandbox):
    response = httpx.get(f"{fleet.url}/v1/sandboxes/{sandbox.id}/files", params={"path": "/etc/\x00"})
    assert response.status_code == 422, response.text[:300]


def _tar_of_zeros(name: str, size: int) -> Iterator[bytes]:
    info = tarfile.TarInfo(name)
    info.size = size
    yield info.tobuf(format=tarfile.USTAR_FORMAT)
    for start in range(0, size, MIB):
        yield bytes(min(MIB, size - start))
    yield bytes(-size % tarfile.BLOCKSIZE) + bytes(2 * tarfile.BLOCKSIZE)


def test_a_large_upload_streams_through_admin_worker_and_rocklet(fleet: LocalFleet, sandbox: Sandbox):
    """256 MiB into a 128m sandbox: held whole anywhere on its way, it would grow the admin (which hosts
    the local worker) by as much and OOM-kill the sandbox's rocklet."""
    assert fleet.admin.proc is not None
    before = _peak_rss(fleet.admin.proc.pid)
    response = httpx.post(
        f"{fleet.url}/v1/sandboxes/{sandbox.id}/upload",
        params={"dest": "/srv/up"},
        content=_tar_of_zeros("zeros.bin", UPLOAD),
        timeout=300,
    )
    assert response.status_code == 200, response.text[:300]
    assert sandbox.run("stat -c %s /srv/up/zeros.bin; rm /srv/up/zeros.bin").output.strip() == str(UPLOAD)
    assert _peak_rss(fleet.admin.proc.pid) - before < UPLOAD // 4
    assert sandbox.refresh().state == "running"


def test_a_json_body_over_the_limit_is_413_on_a_running_sandbox(fleet: LocalFleet, sandbox: Sandbox):
    body = json.dumps({"cmd": "true", "env": {"BIG": "x" * (2 * MIB)}})
    response = httpx.post(f"{fleet.url}/v1/sandboxes/{sandbox.id}/exec", content=body, timeout=30)
    assert response.status_code == 413 and response.json()["type"] == "PayloadTooLarge"


def test_a_create_whose_client_left_while_it_started_is_removed(fleet: LocalFleet):
    body = json.dumps({"image": "python:3.11", **SMALL}).encode()
    before = {s["id"] for s in httpx.get(f"{fleet.url}/v1/sandboxes", params={"all": "true"}).json()}
    host, port = fleet.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(
            b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        time.sleep(0.05)  # the admin has the request, and leaves it while the sandbox starts
    new: list[dict] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        listed = httpx.get(f"{fleet.url}/v1/sandboxes", params={"all": "true"}).json()
        new = [s for s in listed if s["id"] not in before]
        if new and new[0]["state"] == "deleted":
            break
        time.sleep(0.2)
    assert len(new) == 1 and new[0]["state"] == "deleted", new
    assert new[0]["id"] not in fleet.containers()


def test_a_large_download_streams_through_rocklet_worker_and_admin(fleet: LocalFleet, sandbox: Sandbox):
    assert fleet.admin.proc is not None
    sandbox.run("mkdir -p /srv/down && truncate -s 256M /srv/down/zeros.bin")
    before = _peak_rss(fleet.admin.proc.pid)
    received = 0
    with httpx.stream(
        "GET", f"{fleet.url}/v1/sandboxes/{sandbox.id}/download", params={"path": "/srv/down"}, timeout=300
    ) as response:
        assert response.status_code == 200
        for piece in response.iter_raw():
            received += len(piece)
    sandbox.run("rm -r /srv/down")
    assert received >= UPLOAD + 3 * tarfile.BLOCKSIZE
    assert _peak_rss(fleet.admin.proc.pid) - before < UPLOAD // 4
    assert sandbox.refresh().state == "running"


def test_a_download_of_an_unreadable_file_is_a_clear_error(fleet: LocalFleet, tmp_path: Path):
    with (
        Sandbox("python:3.11", admin_url=fleet.url, **SMALL) as unprivileged,
        pytest.raises(SandboxRequestError, match="/etc/shadow is not readable by the sandbox's user"),
    ):
        unprivileged.download("/etc/shadow", tmp_path)


def test_the_sdk_uploads_a_folder_without_holding_its_archive_in_memory(sandbox: Sandbox, tmp_path: Path):
    folder = tmp_path / "big"
    folder.mkdir()
    with (folder / "zeros.bin").open("wb") as handle:
        handle.truncate(UPLOAD // 2)
    tracemalloc.start()
    try:
        sandbox.upload(folder, "/srv/sdk")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sandbox.run("stat -c %s /srv/sdk/big/zeros.bin; rm -r /srv/sdk").output.strip() == str(UPLOAD // 2)
    assert peak < UPLOAD // 8


async def test_the_async_sdk_uploads_in_pieces_too(fleet: LocalFleet, tmp_path: Path):
    (tmp_path / "small.txt").write_text("in pieces\n")
    async with AsyncSandbox("python:3.11", admin_url=fleet.url, **SMALL) as sandbox:
        await sandbox.upload(tmp_path / "small.txt", "/tmp/async")
        assert (await sandbox.run("cat /tmp/async/small.txt")).output == "in pieces\n"
