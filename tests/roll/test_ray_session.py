"""A killed driver's local Ray helpers (GCS, raylet) are stopped by the next run in the same folder.

A real driver process starts its own local Ray and is killed with SIGKILL alone, so its helpers live on as
they do after a crash; the test's own process group cleanup removes anything left if an assertion fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from roll.pipeline.ray_session import RECORD, leftovers, stop_previous

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DRIVER = """
import sys, time
from roll.pipeline.cluster import init_ray
from roll.pipeline.config import TrainConfig
init_ray(TrainConfig.model_validate({"output_dir": sys.argv[1], "ray": {"num_cpus": 1}}))
print("up", flush=True)
time.sleep(600)
"""


def test_the_next_run_stops_what_a_killed_driver_left(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | {"PYTHONPATH": str(ROOT)}
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(run_dir)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        assert driver.stdout is not None and driver.stdout.readline().strip() == "up"
        record = json.loads((run_dir / RECORD).read_text())
        assert record["driver_pid"] == driver.pid
        assert stop_previous(run_dir) == 0  # its driver still runs: nothing is touched
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
        time.sleep(1)
        assert leftovers(record["temp_dir"]), "the killed driver's Ray helpers should outlive it"
        assert stop_previous(run_dir) > 0
        assert leftovers(record["temp_dir"]) == []
        assert not (run_dir / RECORD).exists() and not Path(record["temp_dir"]).exists()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(driver.pid, signal.SIGKILL)  # its helpers share the driver's process group
        driver.wait()
