"""Two workers on one host never share an id: the default id takes the first free slot of its state folder,
held by a lock for the worker process's life (issue 20: they used to share one and fail every sandbox)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rock.worker.identity import claim_id, default_id_base

HOLD = """
import sys, time
from pathlib import Path
from rock.worker.identity import claim_id
worker_id, lock = claim_id(Path(sys.argv[1]), sys.argv[2])
print(worker_id, flush=True)
sys.stdin.read()
"""


def hold(state_dir, requested: str = "") -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", HOLD, str(state_dir), requested],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_worker_processes_on_one_state_folder_get_distinct_ids(tmp_path):
    base = default_id_base(tmp_path)
    first, second = hold(tmp_path), None
    try:
        assert first.stdout is not None and first.stdout.readline().strip() == base
        second = hold(tmp_path)
        assert second.stdout is not None and second.stdout.readline().strip() == f"{base}-2"
        first.communicate("")
        worker_id, lock = claim_id(tmp_path, "")  # a restarted first worker takes its old id back
        assert worker_id == base
        lock.close()
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.communicate("")


def test_an_explicit_id_held_by_a_live_worker_is_refused(tmp_path):
    holder = hold(tmp_path, "node-a")
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "node-a"
        with pytest.raises(ValueError, match=r"already runs with id 'node-a'.*its own --id"):
            claim_id(tmp_path, "node-a")
        other, lock = claim_id(tmp_path, "node-b")
        assert other == "node-b"
        lock.close()
    finally:
        holder.communicate("")
