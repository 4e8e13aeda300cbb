"""Sandbox code that tries to put its own listener in place of the rocklet's socket (issue 26, item 1).

The impostor renames rocklet.sock, listens at the old path, logs whatever reaches it and answers every
request with `1` (a forged reward). Two layers stop it: the rocklet's folder is sealed read-only once its
socket is there, so the rename is refused; and were a listener there anyway, the worker checks each
connection's peer and sends it nothing (tests/rock/adversarial/test_rocklet_peer.py shows that layer alone).
"""

from __future__ import annotations

import errno
import subprocess
import time

import pytest

from rock.fleet import LocalFleet
from rock.sdk.errors import RemoteFileNotFound
from rock.sdk.sandbox import Sandbox
from rock.worker.containers import container_name

pytestmark = [pytest.mark.docker, pytest.mark.slow]
SMALL = {"cpus": 0.5, "memory": "256m"}
KEEPALIVE_EXPIRY = 5.0
"""Seconds the worker keeps an idle connection to a rocklet: past them, its next call connects again."""

IMPOSTOR = r"""
import os, socket
where = "/run/rock/rocklet/rocklet.sock"
moves = (
    lambda: os.rename(where, "/run/rock/rocklet/real.sock"),
    lambda: os.unlink(where),
    lambda: os.rename("/run/rock/rocklet", "/run/rock/old"),
)
for move in moves:
    try:
        move()
    except OSError as exc:
        with open("/tmp/impostor.refused", "a") as refused:
            refused.write("%d\n" % exc.errno)
        continue
    impostor = socket.socket(socket.AF_UNIX)
    impostor.bind(where)
    raise SystemExit("moved the rocklet's socket and listen in its place")
raise SystemExit("every way to move the rocklet's socket was refused")
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
def test_no_sandbox_process_can_move_the_rocklets_socket(fleet: LocalFleet, user):
    options = {"user": user} if user else {}
    sandbox = Sandbox("python:3.11", admin_url=fleet.url, **options, **SMALL)
    try:
        sandbox.write_file("/tmp/impostor.py", IMPOSTOR.encode())
        tried = sandbox.exec(["python3", "/tmp/impostor.py"], timeout=20)
        # Read-only file system for the socket, busy for the folder (a mount point): nothing moved.
        assert tried.exit_code != 0 and "every way" in tried.output, tried.output
        refusals = _in_container(sandbox.id, "cat /tmp/impostor.refused").split()
        assert refusals == [str(errno.EROFS)] * 2 + [str(errno.EBUSY)], refusals
        # Past the keep-alive, the worker's next call opens a new connection: still to its rocklet.
        time.sleep(KEEPALIVE_EXPIRY + 1)
        with pytest.raises(RemoteFileNotFound):
            sandbox.read_file("/logs/verifier/reward.txt")
        assert sandbox.exec(["echo", "still the rocklet"], timeout=20).output == "still the rocklet\n"
        assert sandbox.refresh().failure_reason is None
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
