"""Sandbox code that puts its own listener in place of the rocklet's socket (issue 26, item 1).

The impostor renames rocklet.sock, listens at the old path, logs whatever reaches it and answers every
request with `1` (a forged reward). The worker must refuse it on connect: it never sends the impostor a byte
(so never the sandbox's token), and no read through the worker returns the forged answer.
"""

from __future__ import annotations

import subprocess
import time

import pytest

from rock.fleet import LocalFleet
from rock.sdk.errors import RockError
from rock.sdk.sandbox import Sandbox
from rock.sdk.types import FailureReason
from rock.worker.containers import container_name

pytestmark = [pytest.mark.docker, pytest.mark.slow]
SMALL = {"cpus": 0.5, "memory": "256m"}
KEEPALIVE_EXPIRY = 5.0
"""Seconds the worker keeps an idle connection to a rocklet: past them, its next call connects again."""

IMPOSTOR = r"""
import os, socket
where = "/run/rock/rocklet.sock"
os.rename(where, "/run/rock/real.sock")
listener = socket.socket(socket.AF_UNIX)
listener.bind(where)
os.chmod(where, 0o666)
listener.listen(16)
open("/tmp/impostor.ready", "w").close()
while True:
    conn, _ = listener.accept()
    conn.settimeout(2)
    try:
        seen = conn.recv(65536)
    except OSError:
        seen = b""
    with open("/tmp/impostor.log", "ab") as log:
        log.write(seen)
    try:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n1")
    except OSError:
        pass
    conn.close()
"""


def _in_container(sandbox_id: str, command: str) -> str:
    """Run `command` in the sandbox's container straight through Docker (the worker no longer talks to it)."""
    done = subprocess.run(
        ["docker", "exec", container_name(sandbox_id), "sh", "-c", command],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return done.stdout


@pytest.mark.parametrize("user", ["root", None], ids=["root", "default-uid"])
def test_an_impostor_at_the_rocklets_path_is_refused_and_never_sees_the_token(fleet: LocalFleet, user):
    options = {"user": user} if user else {}
    sandbox = Sandbox("python:3.11", admin_url=fleet.url, **options, **SMALL)
    try:
        sandbox.write_file("/tmp/impostor.py", IMPOSTOR.encode())
        started = sandbox.exec(["sh", "-c", "setsid python3 /tmp/impostor.py >/dev/null 2>&1 &"], timeout=20)
        assert started.exit_code == 0
        deadline = time.monotonic() + 20
        while "ready" not in _in_container(sandbox.id, "ls /tmp/impostor.ready && echo ready"):
            assert time.monotonic() < deadline, "the impostor did not start"
            time.sleep(0.2)
        # Past the keep-alive, the worker's next call opens a new connection: to whatever is at the path.
        time.sleep(KEEPALIVE_EXPIRY + 1)
        forged = None
        with pytest.raises(RockError) as refused:
            forged = sandbox.read_file("/logs/verifier/reward.txt")
        assert forged is None
        assert getattr(refused.value, "reason", None) == FailureReason.SOCKET_TAMPERED, refused.value
        seen = _in_container(sandbox.id, "cat /tmp/impostor.log 2>/dev/null")
        assert "Bearer" not in seen and "GET" not in seen, seen
    finally:
        sandbox.close()


@pytest.mark.parametrize("user", ["root", None], ids=["root", "default-uid"])
def test_the_rocklets_memory_is_closed_to_the_sandbox(fleet: LocalFleet, user):
    """The rocklet holds the token (and its listening socket): no process of the sandbox may read or
    attach to it, root or not (it shares their uid)."""
    options = {"user": user} if user else {}
    probe = (
        "import os\n"
        "for path in ('/proc/1/mem', '/proc/1/environ'):\n"
        "    try:\n"
        "        open(path, 'rb').read(1)\n"
        "        print('READ', path)\n"
        "    except OSError as exc:\n"
        "        print('refused', path, exc.errno)\n"
    )
    with Sandbox("python:3.11", admin_url=fleet.url, **options, **SMALL) as sandbox:
        sandbox.write_file("/tmp/probe.py", probe.encode())
        output = sandbox.exec(["python3", "/tmp/probe.py"], timeout=30).output
        assert "READ" not in output and output.count("refused") == 2, output
