"""`python -m rock.rocklet [--socket PATH]`: serve until SIGTERM/SIGINT.

Arguments are read by hand: argparse would add a tenth to the start-up time of every sandbox.
"""

import os
import signal
import sys
import threading

from rock.rocklet.procs import reap_orphans_forever
from rock.rocklet.runaway import guard_pids
from rock.rocklet.server import DEFAULT_SOCKET, Rocklet, make_server

USAGE = "usage: python -m rock.rocklet [--socket PATH]"


def main(argv: list[str]) -> None:
    socket_path = DEFAULT_SOCKET
    if argv[:1] in (["-h"], ["--help"]):
        print(USAGE)
        return
    if argv:
        if len(argv) != 2 or argv[0] != "--socket":
            sys.exit(f"rocklet: unexpected arguments {argv}; {USAGE}")
        socket_path = argv[1]
    state_dir = os.path.join(os.path.dirname(socket_path), "rocklet-state")
    os.makedirs(state_dir, exist_ok=True)
    app = Rocklet(state_dir)
    server = make_server(socket_path, app)
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
        if os.path.exists(socket_path):
            os.unlink(socket_path)


if __name__ == "__main__":
    main(sys.argv[1:])
