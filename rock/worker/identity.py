"""A worker's identity on its host: its id, held by a lock for as long as the worker process lives.

Two workers on one host never share an id. The default id is the host name and a hash of the state folder,
with `-2`, `-3`, ... for a second, third worker on the same folder: each takes the first id whose lock is
free, and a restarted worker takes its old id back (the lock died with the old process), so it adopts its
containers. An explicit id already held by a live worker on this state folder is refused. Each id has its own
run folder (STATE_DIR/run/ID), so workers sharing a state folder never remove each other's socket folders.
"""

from __future__ import annotations

import fcntl
import hashlib
import socket
from pathlib import Path
from typing import IO

MAX_WORKERS_PER_FOLDER = 64


def default_id_base(state_dir: Path) -> str:
    digest = hashlib.sha1(str(state_dir.resolve()).encode()).hexdigest()[:6]
    return f"{socket.gethostname()}-{digest}"


def _try_lock(path: Path) -> IO[bytes] | None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = path.open("ab")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


def claim_id(state_dir: Path, requested: str) -> tuple[str, IO[bytes]]:
    """(the worker id, its lock; keep it open while the worker runs). Raises ValueError when `requested` is
    held by another live worker on `state_dir`, or when every default id is taken."""
    locks = state_dir / "locks"
    if requested:
        held = _try_lock(locks / f"{requested}.lock")
        if held is None:
            raise ValueError(
                f"another worker on this host already runs with id {requested!r} and state folder "
                f"{state_dir}; give each worker its own --id (or leave it out to get a free one)"
            )
        return requested, held
    base = default_id_base(state_dir)
    for n in range(1, MAX_WORKERS_PER_FOLDER + 1):
        candidate = base if n == 1 else f"{base}-{n}"
        held = _try_lock(locks / f"{candidate}.lock")
        if held is not None:
            return candidate, held
    raise ValueError(
        f"{MAX_WORKERS_PER_FOLDER} workers already run on state folder {state_dir}; stop one or pass "
        "--state-dir"
    )
