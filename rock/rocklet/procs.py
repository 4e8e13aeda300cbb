"""Finding and killing every process of a session (Linux /proc), so a timeout leaves nothing running.

A command started by the rocklet is a session leader; everything it forks keeps that session id unless it
calls setsid itself. Killing by session id also catches children that moved to their own process group.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Collection

from rock.rocklet.errors import SandboxExhausted

# Importing typing adds ~4 ms to every sandbox's start; only type checkers need it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_F_SETPIPE_SZ = 1031


def processes() -> list[tuple[int, bytes, int, int]]:
    """(pid, state, ppid, session id) of every process visible in /proc (few, inside a sandbox)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat_file:
                stat = stat_file.read()
        except OSError:
            continue
        # The command name sits in parentheses and may itself contain spaces or parentheses.
        fields = stat[stat.rfind(b")") + 2 :].split()
        found.append((int(entry), fields[0], int(fields[1]), int(fields[3])))
    return found


def session_members(sid: int) -> list[int]:
    """Pids of live (non-zombie) processes whose session id is `sid`."""
    return [pid for pid, state, _, session in processes() if session == sid and state != b"Z"]


def kill_session(sid: int, spare: Collection[int] = (), rounds: int = 50) -> None:
    """SIGKILL every process in session `sid` except those in `spare`."""
    stop_then_kill(lambda: [pid for pid in session_members(sid) if pid not in spare], rounds)


def kill_pipe_holders(sid: int, pipe_fd: int, rounds: int = 50) -> None:
    """SIGKILL every process in session `sid` that holds the other end of the pipe read through `pipe_fd`."""
    link = f"pipe:[{os.fstat(pipe_fd).st_ino}]"

    def holders() -> list[int]:
        found = []
        for pid in session_members(sid):
            with contextlib.suppress(OSError):
                if any(_readlink(f"/proc/{pid}/fd/{fd}") == link for fd in os.listdir(f"/proc/{pid}/fd")):
                    found.append(pid)
        return found

    stop_then_kill(holders, rounds)


def _readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


def stop_then_kill(targets: Callable[[], list[int]], rounds: int) -> bool:
    """SIGKILL what `targets()` lists; False if it listed nothing.

    Everything is stopped first and killed after, so a fork bomb cannot refill what was just killed.
    """
    stopped: set[int] = set()
    for _ in range(rounds):
        running = [pid for pid in targets() if pid not in stopped]
        if not running:
            break
        for pid in running:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
            stopped.add(pid)
    if not stopped:
        return False
    for _ in range(rounds):
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        stopped = set(targets())
        if not stopped:
            break
    return True


def readable(fd: int, timeout: float) -> bool:
    """Wait up to `timeout` seconds for data or end of file on `fd` (poll: no limit on fd numbers)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(timeout * 1000))


def enlarge_pipe(fd: int, size: int = 1 << 20) -> None:
    """Ask for a bigger pipe buffer so a chatty command costs fewer reads; the default is fine too."""
    with contextlib.suppress(OSError):
        fcntl.fcntl(fd, _F_SETPIPE_SZ, size)


# Children the rocklet waits for itself. As PID 1 it also inherits every orphan in the sandbox, and must reap
# those without stealing the exit status of its own children, so both sides take this lock.
_spawn_lock = threading.Lock()
_spawned: set[int] = set()
SPAWN_ATTEMPTS = 10


def spawn(argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """Popen, registered for the orphan reaper. A full process table (say, right after a fork bomb was
    killed, while its zombies are being reaped) is retried for a while, then raised as SandboxExhausted."""
    for attempt in range(SPAWN_ATTEMPTS):
        with _spawn_lock:
            try:
                proc = subprocess.Popen(argv, **kwargs)
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.ENOMEM):
                    raise
                failure = exc
            else:
                _spawned.add(proc.pid)
                return proc
        reap_orphans()
        time.sleep(0.05 * (attempt + 1))
    raise SandboxExhausted(
        f"cannot start {argv[0]}: {failure}; the sandbox is at its process or memory limit (a runaway "
        "command may still be running: wait for its timeout, or close its session)"
    )


def reap(proc: subprocess.Popen[bytes]) -> int:
    code = proc.wait()
    with _spawn_lock:
        _spawned.discard(proc.pid)
    return code


def reap_orphans() -> None:
    """Reap zombie children the rocklet did not start itself (orphans it inherits as PID 1)."""
    me = os.getpid()
    with _spawn_lock:
        for pid, state, ppid, _ in processes():
            if state == b"Z" and ppid == me and pid not in _spawned:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)


def reap_orphans_forever(interval: float = 1.0) -> None:
    while True:
        time.sleep(interval)
        reap_orphans()
