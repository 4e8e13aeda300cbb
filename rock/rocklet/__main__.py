"""`python -m rock.rocklet [--socket PATH] [--token-file PATH] [--state-dir PATH]`: serve until SIGTERM.

`--state-dir` holds the sessions' state files (default: `rocklet-state` next to the socket).

With `--token-file`, every request must carry `Authorization: Bearer TOKEN` (the file's content); the file
is removed once read, so the sandbox's own processes cannot read the token from it.

Arguments are read by hand: argparse would add a tenth to the start-up time of every sandbox.
"""

import contextlib
import os
import signal
import sys
import threading

from rock.rocklet.procs import reap_orphans_forever
from rock.rocklet.runaway import guard_pids
from rock.rocklet.server import DEFAULT_SOCKET, Rocklet, make_server

USAGE = "usage: python -m rock.rocklet [--socket PATH] [--token-file PATH] [--state-dir PATH]"


def main(argv: list[str]) -> None:
    if argv[:1] in (["-h"], ["--help"]):
        print(USAGE)
        return
    options = dict(zip(argv[::2], argv[1::2], strict=False))
    if len(argv) % 2 or not set(options) <= {"--socket", "--token-file", "--state-dir"}:
        sys.exit(f"rocklet: unexpected arguments {argv}; {USAGE}")
    socket_path = options.get("--socket", DEFAULT_SOCKET)
    keep_memory_private()
    token = read_token(options["--token-file"]) if "--token-file" in options else None
    state_dir = options.get("--state-dir") or os.path.join(os.path.dirname(socket_path), "rocklet-state")
    os.makedirs(state_dir, exist_ok=True)
    app = Rocklet(state_dir)
    server = make_server(socket_path, app, token)
    app.open_default_session()
    if os.getpid() == 1:
        threading.Thread(target=reap_orphans_forever, name="reaper", daemon=True).start()
        # As PID 1 it sees just the sandbox's processes, so it may cull them when they near the pids limit.
        threading.Thread(target=guard_pids, args=(app.shell_pids,), name="pids-guard", daemon=True).start()

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        server.serve_forever(poll_interval=3600)
    finally:
        app.shutdown()
        server.server_close()
        with contextlib.suppress(OSError):  # a sealed (read-only) folder keeps it: it goes with the folder
            os.unlink(socket_path)


PR_SET_DUMPABLE = 4
"""prctl(2) option from <linux/prctl.h>."""


def keep_memory_private() -> None:
    """Make the rocklet undumpable, before it reads its token: processes of the sandbox share its uid (or are
    root), and would otherwise read its memory through /proc/1/mem, ptrace or pidfd_getfd (and with it the
    token, or the listening socket itself). Only CAP_SYS_PTRACE, which no sandbox has, passes this."""
    import ctypes

    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        sys.exit(f"rocklet: cannot make itself undumpable: {os.strerror(ctypes.get_errno())}")


def read_token(path: str) -> str:
    try:
        with open(path) as handle:
            token = handle.read().strip()
        os.unlink(path)
    except OSError as exc:
        sys.exit(f"rocklet: cannot read the token file {path}: {exc}; the worker writes it before the start")
    if not token:
        sys.exit(f"rocklet: the token file {path} is empty")
    return token


if __name__ == "__main__":
    main(sys.argv[1:])
