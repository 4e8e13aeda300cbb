"""The pids guard: when a sandbox nears its pids limit, what no running command owns is killed.

A fork bomb put in the background (`:(){ :|:& };:`) returns at once and would hold the limit until the
sandbox ends, so no later command could start a process. Processes of a command still running (its root and
their descendants) are left to that command's own timeout, so a command that merely runs into the limit still
sees EAGAIN itself; so are the rocklet and its session shells.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from collections.abc import Callable, Collection

from rock.rocklet.procs import processes, reap_orphans, stop_then_kill

_PIDS_FILES = (
    ("/sys/fs/cgroup/pids/pids.current", "/sys/fs/cgroup/pids/pids.max"),  # cgroup v1, inside a container
    ("/sys/fs/cgroup/pids.current", "/sys/fs/cgroup/pids.max"),  # cgroup v2
)
PIDS_PRESSURE = 0.9
"""Share of the sandbox's pids limit in use at which its runaway processes are killed."""
PRESSURE_SAMPLES = 2
"""Checks in a row that must find the pressure before anything is killed."""

_busy_lock = threading.Lock()
_busy: dict[int, frozenset[int]] = {}


def mark_busy(root: int, barrier: Collection[int] = ()) -> None:
    """A command runs under `root` (a one-shot command's process, or a session's shell): the descendants of
    `root` are its own, except those reached through a process in `barrier` (jobs of earlier commands)."""
    with _busy_lock:
        _busy[root] = frozenset(barrier)


def mark_idle(root: int) -> None:
    with _busy_lock:
        _busy.pop(root, None)


def pids_usage() -> tuple[int, int] | None:
    """(tasks in use, limit) of this sandbox's pids cgroup; None where no limit is visible."""
    for current_file, max_file in _PIDS_FILES:
        try:
            with open(current_file) as current, open(max_file) as limit:
                used, most = current.read().strip(), limit.read().strip()
        except OSError:
            continue
        if used.isdigit() and most.isdigit():
            return int(used), int(most)
    return None


def runaways(spare: Collection[int]) -> list[int]:
    """Live processes that are not the rocklet, not in `spare`, and not owned by a running command."""
    table = {pid: ppid for pid, state, ppid, _ in processes() if state != b"Z"}
    with _busy_lock:
        busy = dict(_busy)
    keep = {os.getpid(), *spare, *busy}
    return [pid for pid in table if pid not in keep and not _owned(pid, table, busy)]


def _owned(pid: int, table: dict[int, int], busy: dict[int, frozenset[int]]) -> bool:
    """Whether `pid` descends from a busy root other than through a job of an earlier command."""
    path, current = [], pid
    for _ in range(len(table)):
        if current in busy:
            return not any(link in busy[current] for link in path)
        path.append(current)
        parent = table.get(current)
        if parent is None:
            return False
        current = parent
    return False


def relieve(spare: Collection[int]) -> bool:
    """If the sandbox is near its pids limit now, kill its runaway processes; whether it was."""
    usage = pids_usage()
    if usage is None or usage[0] < PIDS_PRESSURE * usage[1]:
        return False
    if stop_then_kill(functools.partial(runaways, set(spare)), rounds=50):
        print(
            f"rocklet: {usage[0]} of {usage[1]} pids were in use: killed what no running command owns",
            file=sys.stderr,
            flush=True,
        )
    reap_orphans()
    return True


def guard_pids(spare: Callable[[], Collection[int]], interval: float = 0.2) -> None:
    """Forever: when the sandbox stays near its pids limit, kill its runaway processes (see the module).

    Near means PIDS_PRESSURE of the limit, so the rocklet keeps room for the threads that answer the worker;
    it must last PRESSURE_SAMPLES checks in a row, so a build that brushes past it is left alone. A command
    that starts meanwhile does not wait for that: see `before_command`.
    """
    global _spare
    _spare = spare
    pressed = 0
    while True:
        time.sleep(interval)
        usage = pids_usage()
        pressed = pressed + 1 if usage is not None and usage[0] >= PIDS_PRESSURE * usage[1] else 0
        if pressed >= PRESSURE_SAMPLES:
            pressed = 0
            relieve(spare())


_spare: Callable[[], Collection[int]] | None = None
"""Set once the guard runs (the rocklet is the sandbox's PID 1): the processes it must spare."""


def before_command() -> None:
    """A command about to start in a sandbox at its pids limit would fail to fork: free the runaways first."""
    if _spare is not None:
        relieve(_spare())
