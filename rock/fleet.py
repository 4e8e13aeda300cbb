"""The one local-fleet launcher (tests, benchmarks, rome-bench and `rock demo`): `rock admin serve` and
`rock worker serve` as processes on free loopback ports, each in its own process group with its log in the
fleet's state folder, sharing a fresh worker credential through the environment (never the command line).

`python -m rock.fleet --parent-pid PID --worker-id W --state-dir D -- ARGS` runs `rock ARGS` and, should the
process PID die without stopping the fleet, removes the fleet's containers and state folder and stops.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from rock.worker.lifetime import OWNER_ENV
from rock.worker.socket_dir import release_mounts_under

if TYPE_CHECKING:
    from rock.admin.config import AdminConfig


_handed_out: set[int] = set()


def free_port(host: str = "127.0.0.1") -> int:
    """A port free now and not handed out before by this process: the kernel may give a port that was just
    released again, so two ports picked one after the other for one fleet (its admin and its proxy) could be
    the same before either is bound."""
    for _ in range(64):
        with socket.socket() as sock:
            sock.bind((host, 0))
            port: int = sock.getsockname()[1]
        if port not in _handed_out:
            break
    _handed_out.add(port)
    return port


def short_tmp(prefix: str) -> Path:
    """A folder with a short path: unix socket paths under it must stay below 108 bytes."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


class FleetProcess:
    """One `rock ...` command running in its own process group, its output in a log file."""

    def __init__(
        self, args: list[str], log: Path, env: dict[str, str] | None = None, guard: list[str] | None = None
    ) -> None:
        """`env`: variables added to the environment (secrets go here). `guard`: run under `python -m
        rock.fleet GUARD --`, which cleans up if the launching process dies."""
        self.args, self.log, self.env, self.guard = args, log, env or {}, guard
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> FleetProcess:
        runner = ["-m", "rock.fleet", *self.guard, "--"] if self.guard else ["-m", "rock.cli"]
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, *runner, *self.args],
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


class LocalFleet:
    """An admin (with its local worker unless `local_worker=False`) on a free port, state in `state_dir`.

    `with LocalFleet(slots=4) as fleet:` starts it and waits for its worker; `fleet.worker` is one separate
    worker process (not started), `add_worker` makes more. Leaving the block (or `close`) stops every process
    and removes the containers of every worker id this fleet used, and the state folder.
    """

    def __init__(
        self,
        state_dir: Path | None = None,
        worker_id: str | None = None,
        *,
        local_worker: bool = True,
        host: str = "127.0.0.1",
        api_key: str | None = None,
        slots: int | None = None,
        admin_args: list[str] | None = None,
        database_url: str | None = None,
        stop_with_parent: bool = False,
        start_timeout: float = 240.0,
    ) -> None:
        """`admin_args`: more `rock admin serve` options. `database_url`: the admin's store (passed in the
        environment, as it may hold a password). `stop_with_parent`: clean up even if this process is killed
        without leaving the block (rome-bench)."""
        self.state_dir = state_dir or short_tmp("rock-fleet-")
        self.worker_id = worker_id or f"fleet-{os.getpid()}-{self.state_dir.name}"
        self.worker_ids = [self.worker_id]
        self.host, self.start_timeout, self.local_worker = host, start_timeout, local_worker
        self.api_key = api_key
        self.port = free_port(host)
        self.url = f"http://{host}:{self.port}"
        self.worker_token = secrets.token_urlsafe(24)
        # The fleet ends with this process (rock.worker.lifetime): its workers watch it and remove their
        # containers.
        self._secret = {"ROCK_WORKER_TOKEN": self.worker_token, OWNER_ENV: str(os.getpid())}
        self._stop_with_parent = stop_with_parent
        admin = ["admin", "serve", "--port", str(self.port), "--state-dir", str(self.state_dir)]
        admin += ["--host", host, "--log-level", "info"]
        admin += ["--api-key", api_key] if api_key else []
        admin += ["--worker-id", self.worker_id] if local_worker else ["--no-local-worker"]
        admin += ["--worker-slots", str(slots)] if slots is not None and local_worker else []
        admin += admin_args or []
        admin_env = {**self._secret, "ROCK_DATABASE_URL": database_url} if database_url else self._secret
        self.admin = FleetProcess(admin, self.state_dir / "admin.log", admin_env, self._guard())
        self.workers: list[FleetProcess] = []
        self.worker = self.add_worker(self.worker_id, state_dir=self.state_dir / "worker", slots=slots)

    def _guard(self) -> list[str] | None:
        if not self._stop_with_parent:
            return None
        return ["--parent-pid", str(os.getpid()), "--state-dir", str(self.state_dir)] + [
            arg for wid in self.worker_ids for arg in ("--worker-id", wid)
        ]

    def add_worker(
        self,
        worker_id: str | None,
        state_dir: Path | None = None,
        slots: int | None = None,
        extra: list[str] | None = None,
    ) -> FleetProcess:
        """A `rock worker serve` process for this admin (not started); `worker_id` None lets the worker pick
        its default id (learnt from the admin when the fleet closes, to remove its containers)."""
        if worker_id is not None and worker_id not in self.worker_ids:
            self.worker_ids.append(worker_id)
        folder = state_dir or self.state_dir / f"w-{worker_id}"
        args = ["worker", "serve", "--admin", self.url, "--state-dir", str(folder)]
        args += ["--id", worker_id] if worker_id is not None else []
        args += ["--host", self.host, "--log-level", "info"]
        args += ["--slots", str(slots)] if slots is not None else []
        log = self.state_dir / f"worker-{worker_id or len(self.workers)}.log"
        process = FleetProcess([*args, *(extra or [])], log, self._secret)
        process.guard = self._guard()
        self.workers.append(process)
        return process

    def __enter__(self) -> LocalFleet:
        self.admin.start()
        try:
            self.wait_for_workers(1 if self.local_worker else 0, timeout=self.start_timeout)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def health(self) -> dict:
        return httpx.get(f"{self.url}/health", timeout=2).json()

    def registered(self) -> list[dict]:
        """The admin's `/v1/workers` (id, url, capacity, used, ...)."""
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        return httpx.get(f"{self.url}/v1/workers", headers=headers, timeout=5).json()

    def wait_for_workers(self, count: int = 1, timeout: float | None = None) -> None:
        timeout = self.start_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.admin.check_alive()
            for worker in self.workers:
                worker.check_alive()
            try:
                if self.health()["workers"] >= count:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"no worker registered at {self.url} within {timeout:g} s; see {self.state_dir}")

    def containers(self) -> set[str]:
        """Sandbox ids of the containers that carry one of this fleet's worker labels (running or not)."""
        return {sandbox for wid in self.worker_ids for sandbox in labelled_containers(wid)}

    def close(self) -> None:
        """Stop the processes, remove every container this fleet's workers labelled, and the state folder."""
        with contextlib.suppress(httpx.HTTPError, ValueError, TypeError, KeyError):
            self.worker_ids += [w["id"] for w in self.registered() if w["id"] not in self.worker_ids]
        for worker in self.workers:
            worker.stop()
        self.admin.stop()
        self.remove_all_containers()
        release_mounts_under(self.state_dir)
        shutil.rmtree(self.state_dir, ignore_errors=True)

    def remove_all_containers(self) -> None:
        for wid in self.worker_ids:
            remove_containers(wid)


class AdminThread:
    """An admin alone (no worker) served by uvicorn in a thread of this process, for API tests without
    Docker."""

    def __init__(self, config: AdminConfig, envs: bool = False) -> None:
        """`envs`: serve the environment routes under /envs too, as `rock admin serve` does."""
        import uvicorn

        from rock.admin.app import create_app
        from rock.admin.service import Admin

        self.config = config
        self.url = f"http://{config.host}:{config.port}"
        app = create_app(Admin(config), envs_admin_url=self.url if envs else None)
        self.server = uvicorn.Server(
            uvicorn.Config(app, host=config.host, port=config.port, log_level="warning")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> AdminThread:
        self.thread.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/health", timeout=1).is_success:
                    return self
            except httpx.HTTPError:
                time.sleep(0.05)
        raise RuntimeError(f"the admin at {self.url} did not start")

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)


def labelled_containers(worker_id: str) -> set[str]:
    import docker

    client = docker.from_env()
    try:
        found = client.api.containers(all=True, filters={"label": f"rock.worker={worker_id}"})
        return {c["Labels"]["rock.sandbox"] for c in found}
    finally:
        client.close()


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


def _stop_when_orphaned(
    parent_pid: int,
    worker_ids: list[str],
    state_dir: Path,
    child: subprocess.Popen[bytes],
    cleaning: threading.Event,
) -> None:
    while True:
        time.sleep(2)
        try:
            os.kill(parent_pid, 0)
        except ProcessLookupError:
            # Said before the child stops: the main thread, whose wait then returns, must let this finish.
            cleaning.set()
            # The fleet stops first: a create still under way would otherwise start a container after the
            # sweep below, and the stopped worker would leave it running.
            _stop(child)
            _sweep(worker_ids, state_dir)
            os.kill(os.getpid(), signal.SIGTERM)
            return


def _sweep(worker_ids: list[str], state_dir: Path) -> None:
    """What a dead launcher's fleet leaves: its workers' containers, the mounts and the state folder."""
    for wid in worker_ids:
        remove_containers(wid)
    release_mounts_under(state_dir)
    shutil.rmtree(state_dir, ignore_errors=True)


def serve_private(
    slots: int | None, packages: str | None, parent_pid: int, ready: Path, build_roots: list[Path]
) -> None:
    """`rock fleet`: one private fleet (`LocalFleet`, with the package cache `packages` asks for, building
    images from `build_roots`) until SIGTERM or until the process `parent_pid` is gone; then everything it
    made is removed. The base images (`rock image bootstrap`) are built first where missing. The admin's URL
    is written to `ready` (whole, by rename) once its worker registered. Clients start it through
    `rock.sdk.private_fleet.PrivateFleet`."""
    from rock.images.bootstrap import ensure_base_images
    from rock.packages.mode import default_mode, fleet_admin_args

    ensure_base_images()
    admin_args = fleet_admin_args(packages or default_mode())  # type: ignore[arg-type]
    admin_args += [arg for root in build_roots for arg in ("--build-context-root", str(root.resolve()))]
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stopped.set())
    # stop_with_parent: should this process be killed, its admin and worker still take their sandboxes along.
    with LocalFleet(slots=slots, stop_with_parent=True, admin_args=admin_args) as fleet:
        partial = ready.with_name(ready.name + ".partial")
        partial.write_text(fleet.url)
        partial.rename(ready)
        while not stopped.wait(1.0) and _alive(parent_pid):
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description="run `rock ARGS`, cleaning up if the launcher dies")
    parser.add_argument("--parent-pid", type=int, required=True)
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--worker-id", action="append", default=[])
    parser.add_argument("args", nargs=argparse.REMAINDER)
    options = parser.parse_args()
    command = options.args[1:] if options.args[:1] == ["--"] else options.args
    child = subprocess.Popen([sys.executable, "-m", "rock.cli", *command])

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    cleaning = threading.Event()
    guard = (options.parent_pid, options.worker_id, options.state_dir, child, cleaning)
    watcher = threading.Thread(target=_stop_when_orphaned, args=guard, daemon=True)
    watcher.start()
    try:
        child.wait()
    finally:
        _stop(child)
        if cleaning.is_set():  # the launcher died: the sweep of its containers and state folder finishes
            watcher.join(timeout=120)
        elif not _alive(options.parent_pid):
            # The admin watches the launcher too (every second, the watcher every 2 s) and can end on its own
            # first; the sweep then falls to this thread, after the admin's last write.
            _sweep(options.worker_id, options.state_dir)


def _stop(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(timeout=20)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


if __name__ == "__main__":
    main()
