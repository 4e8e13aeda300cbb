"""The local Ray instance of one run: always a new one, in a temp dir of its own, recorded in the run folder.

`ray.init()` without an address attaches to whatever local cluster /tmp/ray/ray_current_cluster names,
which may be the helper processes (GCS, raylet, ~180 MB) of an earlier driver that was killed and that
linger for minutes. A run therefore starts its own instance (`address="local"`) under its own temp dir and
writes that dir and its pid to `<run dir>/ray-session.json`. The next run in the same folder finds the
record; when that driver is gone, the processes still running from its temp dir are its leftovers and are
stopped before Ray starts.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import psutil

RECORD = "ray-session.json"


def leftovers(temp_dir: str) -> list[psutil.Process]:
    """Processes of this user that belong to the Ray session under `temp_dir`: its helpers name the dir on
    their command line, and the agents that outlive a killed driver (`ray::DashboardAgent`,
    `ray::RuntimeEnvAgent`, whose titles hide their arguments) hold their log files there open."""
    found = []
    for process in psutil.process_iter(["pid", "cmdline", "username"]):
        if process.pid == os.getpid() or process.info["username"] != psutil.Process().username():
            continue
        try:
            named = any(temp_dir in part for part in process.info["cmdline"] or [])
            if named or any(f.path.startswith(temp_dir + os.sep) for f in process.open_files()):
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def stop_previous(run_dir: Path) -> int:
    """Stop what a killed driver of this run folder left running; returns how many processes were stopped.
    A record whose driver still runs is left alone (another run is using this folder right now)."""
    record_path = run_dir / RECORD
    if not record_path.is_file():
        return 0
    record = json.loads(record_path.read_text())
    if _started_at(record["driver_pid"]) == record["driver_started"]:
        return 0
    processes = leftovers(record["temp_dir"])
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(processes, timeout=30)
    shutil.rmtree(record["temp_dir"], ignore_errors=True)
    record_path.unlink()
    return len(processes)


def new_temp_dir(run_dir: Path) -> str:
    """A fresh temp dir for this run's Ray, recorded with this driver's pid. Short, under the system temp
    dir: Ray's unix socket paths live in it and are limited to 107 bytes."""
    temp_dir = tempfile.mkdtemp(prefix="roll-ray-")
    run_dir.mkdir(parents=True, exist_ok=True)
    record = {"driver_pid": os.getpid(), "driver_started": _started_at(os.getpid()), "temp_dir": temp_dir}
    (run_dir / RECORD).write_text(json.dumps(record))
    return temp_dir


def _started_at(pid: int) -> float:
    """The process's start time: with the pid it names one process, since pids are reused."""
    try:
        return psutil.Process(pid).create_time()
    except psutil.NoSuchProcess:
        return -1.0
