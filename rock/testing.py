"""Real fleets for tests and benchmarks: `rock admin serve` and `rock worker serve` as processes on free
loopback ports, each in its own process group with its log in the state folder."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import docker
import httpx


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def short_tmp(prefix: str) -> Path:
    """A folder with a short path: unix socket paths under it must stay below 108 bytes."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


class Process:
    """One `rock ...` command running in its own process group, its output in a log file."""

    def __init__(self, args: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        """`env`: variables added to this process's environment (secrets go here, not on the command line)."""
        self.args, self.log, self.env = args, log, env or {}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Process:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "rock.cli", *self.args],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, **self.env},
            )
        return self

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, sig)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(
                f"`rock {' '.join(self.args)}` exited ({self.proc.returncode}):\n"
                f"{self.log.read_text()[-4000:]}"
            )


class Fleet:
    """An admin (with its local worker unless `local_worker=False`) on a free port, state in `state_dir`."""

    def __init__(
        self,
        state_dir: Path,
        worker_id: str,
        local_worker: bool = True,
        host: str = "127.0.0.1",
        api_key: str | None = None,
        admin_args: list[str] | None = None,
    ) -> None:
        """`admin_args`: more `rock admin serve` options (e.g. the model proxy's)."""
        self.state_dir = state_dir
        self.worker_id = worker_id
        self.worker_token = secrets.token_urlsafe(24)
        secret = {"ROCK_WORKER_TOKEN": self.worker_token}
        self.port = free_port(host)
        self.url = f"http://{host}:{self.port}"
        common = ["--host", host, "--log-level", "info"]
        admin = ["admin", "serve", "--port", str(self.port), "--state-dir", str(state_dir), *common]
        admin += ["--api-key", api_key] if api_key else []
        admin += ["--worker-id", worker_id] if local_worker else ["--no-local-worker"]
        admin += admin_args or []
        self.admin = Process(admin, state_dir / "admin.log", secret)
        worker = [
            "worker",
            "serve",
            "--admin",
            self.url,
            "--id",
            worker_id,
            "--state-dir",
            str(state_dir / "worker"),
        ]
        self.worker = Process([*worker, *common], state_dir / "worker.log", secret)

    def wait_for_workers(self, count: int = 1, timeout: float = 240.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.admin.check_alive()
            self.worker.check_alive()
            try:
                if httpx.get(f"{self.url}/health", timeout=2).json()["workers"] >= count:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"no worker registered at {self.url} within {timeout:g} s; see {self.state_dir}")

    def containers(self) -> set[str]:
        """Sandbox ids of the containers that carry this fleet's worker label (running or not)."""
        client = docker.from_env()
        try:
            found = client.api.containers(all=True, filters={"label": f"rock.worker={self.worker_id}"})
            return {c["Labels"]["rock.sandbox"] for c in found}
        finally:
            client.close()

    def close(self) -> None:
        """Stop the processes, remove every container this fleet's worker labelled, and the state folder."""
        self.worker.stop()
        self.admin.stop()
        self.remove_all_containers()
        shutil.rmtree(self.state_dir, ignore_errors=True)

    def remove_all_containers(self) -> None:
        client = docker.from_env()
        try:
            for c in client.api.containers(all=True, filters={"label": f"rock.worker={self.worker_id}"}):
                client.api.remove_container(c["Id"], force=True)
        finally:
            client.close()
