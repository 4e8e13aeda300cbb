"""Nothing outlives its fleet (issue 28): a private fleet's sandboxes end with the process that launched it
(kill -9 of the owner), and a fleet that starts removes the containers of a fleet that is gone for good
(owner and fleet processes all killed -9, so nobody was left to clean up).

Each test's fleet has a worker id of its own; only containers labelled with it are looked at or removed here.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from rock.fleet import LocalFleet, labelled_containers, remove_containers, short_tmp
from rock.worker.lifetime import Owner, owner_gone, start_time
from rock.worker.socket_dir import release_mounts_under

pytestmark = [pytest.mark.docker, pytest.mark.slow]

OWNER = """
import json, sys, time
from pathlib import Path
from rock.fleet import LocalFleet
from rock.sdk.sandbox import Sandbox

fleet = LocalFleet(Path(sys.argv[1]), sys.argv[2]).__enter__()
sandbox = Sandbox("busybox", admin_url=fleet.url, cpus=0.25, memory="64m", ttl=3600)
print(json.dumps({"sandbox": sandbox.id, "admin": fleet.admin.proc.pid}), flush=True)
time.sleep(3600)
"""


def _owner_with_a_sandbox(state_dir: Path, worker_id: str) -> tuple[subprocess.Popen[str], dict]:
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(state_dir), worker_id], stdout=subprocess.PIPE, text=True
    )
    assert owner.stdout is not None
    line = owner.stdout.readline()
    assert line, "the owner process exited before it created its sandbox"
    return owner, json.loads(line)


def _until(check, what: str, tries: int = 600) -> None:  # type: ignore[no-untyped-def]
    for _ in range(tries):
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"never: {what}")


def _alive(pid: int) -> bool:
    return start_time(pid) is not None and "Z" not in Path(f"/proc/{pid}/stat").read_text().split(")")[1][:3]


@pytest.fixture
def private_fleet():  # type: ignore[no-untyped-def]
    from rock.images import ensure_base_images

    ensure_base_images()
    state_dir, worker_id = short_tmp("rock-own-"), f"own-{uuid.uuid4().hex[:8]}"
    procs: list[int] = []
    yield state_dir, worker_id, procs
    for pid in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
    remove_containers(worker_id)
    release_mounts_under(state_dir)
    shutil.rmtree(state_dir, ignore_errors=True)


def test_a_private_fleets_sandboxes_end_with_its_owner_killed_9(private_fleet):
    state_dir, worker_id, procs = private_fleet
    owner, made = _owner_with_a_sandbox(state_dir, worker_id)
    procs.append(made["admin"])
    assert labelled_containers(worker_id) == {made["sandbox"]}
    owner.kill()  # SIGKILL: it leaves no block, and has no guard process (not stop_with_parent)
    owner.wait()
    _until(lambda: not labelled_containers(worker_id), "the worker removed its sandbox once its owner died")
    _until(lambda: not _alive(made["admin"]), "the fleet's admin (and its local worker) stopped")


def test_a_fleet_that_starts_removes_the_containers_of_a_fleet_gone_for_good(private_fleet):
    state_dir, worker_id, _ = private_fleet
    owner, made = _owner_with_a_sandbox(state_dir, worker_id)
    os.killpg(made["admin"], signal.SIGKILL)  # the fleet first, so its worker cannot clean up
    owner.kill()
    owner.wait()
    assert labelled_containers(worker_id) == {made["sandbox"]}  # left behind, its owner provably gone

    with LocalFleet(short_tmp("rock-next-"), f"next-{uuid.uuid4().hex[:8]}"):
        # The new fleet's worker reaps before its first heartbeat, so before the fleet counts as started.
        assert labelled_containers(worker_id) == set()


def test_owner_labels_prove_death_only_on_this_host_and_boot():
    me = Owner.of(os.getpid())
    assert me.alive() and not owner_gone(me.labels())
    child = subprocess.Popen(["sleep", "60"])
    gone = Owner.of(child.pid)
    child.kill()
    child.wait()
    assert owner_gone(gone.labels())
    assert not owner_gone({**gone.labels(), "rock.owner.host": "another-host"})  # not ours to judge
    assert not owner_gone({**gone.labels(), "rock.owner.pidns": "pid:[1]"})  # a pid of another namespace
    assert not owner_gone({"rock.owner.pid": str(child.pid)})  # labels incomplete: never reaped
    reused = {**me.labels(), "rock.owner.start": "1"}  # our pid, but another process's start time
    assert owner_gone(reused)
