"""A private ROCK fleet (`rock admin serve` with its local worker) for one rome-bench run without an admin.

It is the standard fleet: terminal tasks get their root shell per sandbox (`user="root"`, see
rome.bench.rock_sandbox), as they would on any admin. `python -m rome.bench.fleet --port P --state-dir D
--worker-id W --parent-pid PID` runs `rock admin serve` and removes the fleet's containers when it stops,
or when the rome-bench process that started it dies without stopping it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LocalFleet:
    """`with LocalFleet() as fleet:` gives `fleet.url`; leaving the block stops it and its containers."""

    def __init__(
        self,
        slots: int = 64,
        start_timeout: float = 400.0,
        package_cache: Path | None = None,
        offline_packages: bool = False,
    ) -> None:
        # Unix socket paths under the state folder must stay below 108 bytes: keep it short.
        self.state_dir = Path(tempfile.mkdtemp(prefix="rb-", dir="/tmp"))
        self.worker_id = f"rome-bench-{os.getpid()}-{self.state_dir.name}"
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.slots, self.start_timeout = slots, start_timeout
        # devpi-server takes from seconds to minutes (a loaded machine) to start: hence the long timeout.
        self.package_cache, self.offline_packages = package_cache, offline_packages
        self.log = self.state_dir / "fleet.log"
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> LocalFleet:
        import httpx

        args = [
            sys.executable,
            "-m",
            "rome.bench.fleet",
            "--port",
            str(self.port),
            "--slots",
            str(self.slots),
        ]
        args += ["--state-dir", str(self.state_dir), "--worker-id", self.worker_id]
        args += ["--parent-pid", str(os.getpid())]
        if self.package_cache is not None:
            args += ["--package-cache", str(self.package_cache)]
            args += ["--package-cache-offline"] if self.offline_packages else []
        with self.log.open("ab") as out:
            self._proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"the ROCK fleet exited at start:\n{self.log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{self.url}/health", timeout=2).json().get("workers", 0) >= 1:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.__exit__()
        raise RuntimeError(
            f"the ROCK fleet did not register a worker within {self.start_timeout:.0f} s; see {self.log}"
        )

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None and self._proc.poll() is None:
            os.killpg(self._proc.pid, signal.SIGTERM)
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait()
        self._remove_containers()
        shutil.rmtree(self.state_dir, ignore_errors=True)

    def _remove_containers(self) -> None:
        remove_containers(self.worker_id)


def remove_containers(worker_id: str) -> None:
    import docker
    import docker.errors

    client = docker.from_env()
    try:
        for c in client.api.containers(all=True, filters={"label": f"rock.worker={worker_id}"}):
            with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
                client.api.remove_container(c["Id"], force=True)
    finally:
        client.close()


def _stop_when_orphaned(parent_pid: int, worker_id: str, state_dir: Path) -> None:
    """The fleet belongs to one rome-bench process: if that dies without stopping it, clean up and stop."""
    while True:
        time.sleep(2)
        try:
            os.kill(parent_pid, 0)
        except ProcessLookupError:
            remove_containers(worker_id)
            shutil.rmtree(state_dir, ignore_errors=True)
            os.kill(os.getpid(), signal.SIGTERM)
            return


def main() -> None:
    parser = argparse.ArgumentParser(description="rome-bench's private ROCK fleet")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--worker-id", required=True)
    parser.add_argument("--slots", type=int, default=64)
    parser.add_argument("--parent-pid", type=int, required=True)
    parser.add_argument("--package-cache", type=Path)
    parser.add_argument("--package-cache-offline", action="store_true")
    args = parser.parse_args()
    serve = ["admin", "serve", "--port", str(args.port), "--state-dir", str(args.state_dir)]
    serve += ["--worker-id", args.worker_id, "--worker-slots", str(args.slots), "--log-level", "warning"]
    if args.package_cache is not None:
        serve += ["--package-cache", str(args.package_cache)]
        serve += ["--package-cache-offline"] if args.package_cache_offline else []
    admin = subprocess.Popen([sys.executable, "-m", "rock.cli", *serve])

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    watchdog_args = (args.parent_pid, args.worker_id, args.state_dir)
    threading.Thread(target=_stop_when_orphaned, args=watchdog_args, daemon=True).start()
    try:
        admin.wait()
    finally:
        if admin.poll() is None:
            admin.terminate()
            try:
                admin.wait(timeout=20)
            except subprocess.TimeoutExpired:
                admin.kill()
                admin.wait()
        remove_containers(args.worker_id)


if __name__ == "__main__":
    main()
