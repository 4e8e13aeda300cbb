"""`python -m rock.rocklet [--socket PATH]`: serve until SIGTERM/SIGINT."""

import argparse
import os
import signal
import threading
from pathlib import Path

from rock.rocklet.procs import reap_orphans_forever
from rock.rocklet.server import DEFAULT_SOCKET, Rocklet, RockletServer


def main() -> None:
    parser = argparse.ArgumentParser(prog="rocklet", description="The in-sandbox server of ROCK.")
    parser.add_argument("--socket", default=DEFAULT_SOCKET, help="unix socket to serve HTTP on")
    args = parser.parse_args()
    socket_path = Path(args.socket)
    state_dir = socket_path.parent / "rocklet-state"
    state_dir.mkdir(parents=True, exist_ok=True)
    server = RockletServer(str(socket_path), Rocklet(state_dir))
    if os.getpid() == 1:
        threading.Thread(target=reap_orphans_forever, name="reaper", daemon=True).start()

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        server.serve_forever(poll_interval=3600)
    finally:
        server.rocklet.shutdown()
        server.server_close()
        socket_path.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
