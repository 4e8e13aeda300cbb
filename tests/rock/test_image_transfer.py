"""Images where sandboxes run (issue 28): two workers, each on a private dockerd of its own, a task image on
only one of them. Placement prefers the worker that holds it; a sandbox placed on the other gets the image
copied there through the fleet (`docker save` on one worker, streamed by the admin into `docker load` on the
other) before it starts."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid

import pytest

from rock.fleet import LocalFleet, short_tmp
from rock.sdk.sandbox import Sandbox
from rock.worker.socket_dir import release_mounts_under
from tests.rock.test_faults import PrivateDockerd

pytestmark = [pytest.mark.docker, pytest.mark.slow]
SMALL = {"cpus": 0.25, "memory": "64m", "ttl": 600}


def _has(daemon: PrivateDockerd, image: str) -> bool:
    found = subprocess.run(["docker", "-H", daemon.url, "image", "inspect", image], capture_output=True)
    return found.returncode == 0


def test_a_task_image_goes_to_the_worker_that_lacks_it_through_the_fleet():
    if os.geteuid() != 0 or shutil.which("dockerd") is None:
        pytest.skip("a private dockerd needs root and the dockerd binary")
    from rock.images import ensure_base_images

    ensure_base_images()
    daemons = [PrivateDockerd(short_tmp("rock-img-"), live_restore=False) for _ in range(2)]
    task_image = f"rock-transfer-{uuid.uuid4().hex[:8]}:v1"
    fleet = LocalFleet(short_tmp("rock-imgf-"), f"img-{uuid.uuid4().hex[:6]}", local_worker=False)
    try:
        for daemon in daemons:
            daemon.start()
            daemon.load("ale/busybox:latest")
        subprocess.run(["docker", "-H", daemons[0].url, "tag", "ale/busybox:latest", task_image], check=True)
        assert _has(daemons[0], task_image) and not _has(daemons[1], task_image)
        holder, lacker = (f"{fleet.worker_id}-{n}" for n in ("holder", "lacker"))
        for worker_id, daemon in zip((holder, lacker), daemons, strict=True):
            process = fleet.add_worker(worker_id, slots=1)
            process.env = {**process.env, "DOCKER_HOST": daemon.url}
        fleet.admin.start()
        for process in fleet.workers[1:]:
            process.start()
        fleet.wait_for_workers(2)
        for _ in range(300):  # both workers' images listed in a heartbeat
            if all(w["images"] for w in fleet.registered()):
                break
            time.sleep(0.1)

        with Sandbox(task_image, admin_url=fleet.url, **SMALL) as first:
            assert first.info.worker_id == holder  # placement prefers the worker holding the image
            with Sandbox(task_image, admin_url=fleet.url, **SMALL) as second:  # the holder is full
                assert second.info.worker_id == lacker
                assert second.exec(["echo", "here"]).output.strip() == "here"
                assert _has(daemons[1], task_image)
    finally:
        fleet.close()
        for daemon in daemons:
            daemon.stop()
            daemon.remove_bridge()
            release_mounts_under(daemon.root)
            shutil.rmtree(daemon.root, ignore_errors=True)
