"""One-shot exec: a fresh process per call, with the same timeout and output cap as sessions.

When the command's own process exits, the processes it left holding its output are killed: a background job
meant to outlive the command redirects its output, as a service would (`cmd >log 2>&1 &`).
"""

import os
import subprocess
import time

from rock.rocklet.errors import BadRequest
from rock.rocklet.output import CappedOutput, observation
from rock.rocklet.procs import enlarge_pipe, kill_pipe_holders, kill_session, readable, reap, spawn
from rock.rocklet.runaway import before_command, mark_busy, mark_idle
from rock.rocklet.shell import KILL_GRACE, READ_SIZE, find_shell

END_POLL = 0.05
"""Seconds between checks, while the output stays silent, whether the command's own process has exited."""


def run_once(
    cmd: str | list[str], timeout: float, cwd: str | None, env: dict[str, str], max_output: int
) -> dict[str, object]:
    """Run `cmd` (a shell string, or an argv list run without a shell) in its own session."""
    argv = [find_shell(env), "-c", cmd] if isinstance(cmd, str) else cmd
    if not argv:
        raise BadRequest("cmd is an empty list: pass a program and its arguments")
    if cwd is not None and not os.path.isdir(cwd):
        raise BadRequest(f"cwd {cwd!r} is not a directory inside the sandbox; pass an existing one")
    output = CappedOutput(max_output)
    started = time.monotonic()
    before_command()
    try:
        proc = spawn(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    except FileNotFoundError:
        output.feed(f"{argv[0]}: command not found\n".encode())
        return observation(output, 127, time.monotonic() - started, False, timeout)
    except PermissionError:
        output.feed(f"{argv[0]}: permission denied\n".encode())
        return observation(output, 126, time.monotonic() - started, False, timeout)
    mark_busy(proc.pid)
    try:
        return _collect(proc, output, started, timeout)
    finally:
        mark_idle(proc.pid)


def _collect(
    proc: subprocess.Popen[bytes], output: CappedOutput, started: float, timeout: float
) -> dict[str, object]:
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    enlarge_pipe(fd)
    timed_out = ended = False
    deadline = started + timeout
    while True:
        wait = deadline - time.monotonic()
        if wait <= 0:
            if timed_out or ended:
                break  # something that left the session still holds the pipe open: stop reading
            timed_out = True
            kill_session(proc.pid)
            deadline = time.monotonic() + KILL_GRACE
            continue
        if not readable(fd, min(wait, END_POLL)):
            if not ended and proc.poll() is not None:
                # The command is done: what it left in the background still writing to its output goes
                # with it (a fork bomb included); a job that redirected its output (`>log 2>&1 &`)
                # was meant to outlive it and stays.
                ended = True
                kill_pipe_holders(proc.pid, fd)
                deadline = min(deadline, time.monotonic() + KILL_GRACE)
            continue
        data = os.read(fd, READ_SIZE)
        if not data:
            break
        output.feed(data)
    proc.stdout.close()
    exit_code = reap(proc)
    if exit_code < 0:
        exit_code = 128 - exit_code
    return observation(output, exit_code, time.monotonic() - started, timed_out, timeout)
