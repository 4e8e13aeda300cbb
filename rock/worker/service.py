"""A worker: runs sandboxes as Docker containers and talks to each one's rocklet over its unix socket.

It registers with the admin through its heartbeats (capacity and the containers it has), removes the
containers the admin no longer wants, and on start adopts or removes the containers it labelled before.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import docker
import docker.errors
import httpx

from rock.rocklet.client import RockletClient
from rock.rocklet.errors import RockletError, RockletUnavailable, SocketTampered
from rock.sdk.errors import BadRequest, SandboxFailed, SandboxNotFound
from rock.sdk.types import (
    FailureReason,
    SandboxSpec,
    WorkerCapacity,
    parse_memory,
)
from rock.worker import containers, lifetime, socket_dir
from rock.worker.config import WorkerConfig
from rock.worker.contract import (
    CreatedOnWorker,
    CreateOnWorker,
    ShareMember,
    WorkerSandbox,
    heartbeat_url,
    share_member,
)
from rock.worker.disk import DiskWatch
from rock.worker.heartbeats import Heartbeats
from rock.worker.identity import claim_id
from rock.worker.oom import OomWatch
from rock.worker.packages import PackageBridges
from rock.worker.scratch import LoopScratch
from rock.worker.socket_dir import ROCKLET_SOCKET

log = logging.getLogger("rock.worker")
REAP_INTERVAL = 60.0
"""Seconds between looks for the containers of fleets that are gone (rock.worker.lifetime)."""
T = TypeVar("T")


class WorkerService(Heartbeats):
    def __init__(self, config: WorkerConfig) -> None:
        worker_id, self._id_lock = claim_id(config.state_dir, config.id)
        self.config = config.model_copy(update={"id": worker_id})
        self.url = config.url(config.port)
        self._pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix="rock-docker")
        # Heartbeats list containers on their own thread: a burst of creates must not delay them past the
        # admin's heartbeat timeout (which would mark this worker and its sandboxes lost).
        self._heartbeat_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rock-heartbeat")
        self._clients: dict[str, RockletClient] = {}
        self._packages = PackageBridges(config.pypi_cache, config.apt_cache)
        self._specs: dict[str, SandboxSpec] = {}
        # The network a sandbox has now, when a phase narrowed it (rock.worker.phase_network).
        self._networks: dict[str, str] = {}
        self._starting: set[str] = set()
        self._oom = OomWatch()
        self._removing: set[str] = set()
        self._disk = DiskWatch(self._blocking, LoopScratch(config.state_dir / "disks" / worker_id))
        self._closing = False
        self._tampered: dict[str, str] = {}
        """Sandbox id -> how it replaced its rocklet's socket."""
        self._rocklet_pids: dict[str, asyncio.Future[int]] = {}
        """Sandbox id -> its rocklet's host pid (the container's init), the one peer its client accepts."""
        self._rocklet_key = b""
        self._listing: asyncio.Future[tuple[datetime, list[WorkerSandbox]]] | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self._docker: docker.DockerClient | None = None
        self._heartbeats: asyncio.Task[None] | None = None
        self._disk_checks: asyncio.Task[None] | None = None
        self._http = httpx.AsyncClient(timeout=10.0)
        self.runtime_dir = config.state_dir
        self._owner = lifetime.Owner.from_env()
        """The process this fleet ends with (rock.worker.lifetime), or None."""
        self._ending = False
        self._heartbeat_url = heartbeat_url(config.admin_url, None)

    @property
    def token(self) -> str:
        if self.config.token is None:
            raise ValueError(
                f"worker {self.config.id} has no worker credential: pass --token-file "
                "ADMIN_STATE_DIR/worker.token or set ROCK_WORKER_TOKEN"
            )
        return self.config.token.get_secret_value()

    @property
    def docker(self) -> docker.DockerClient:
        assert self._docker is not None, "WorkerService.start() first"
        return self._docker

    async def _blocking(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    def capacity(self) -> WorkerCapacity:
        return WorkerCapacity(
            cpus=self.config.cpus, memory=parse_memory(self.config.memory), slots=self.config.slots
        )

    # start / stop -----------------------------------------------------------------------------------
    async def start(self, port: int) -> None:
        from rock.runtime import ensure_runtime

        self.url = self.config.url(port)
        self._docker = await self._blocking(containers.connect, 64)
        self.runtime_dir = await self._blocking(ensure_runtime)
        self.config.run_dir.mkdir(parents=True, exist_ok=True)
        self._rocklet_key = await self._blocking(socket_dir.rocklet_key, self.config.state_dir)
        await self.reconcile()
        reaped = await self._blocking(lifetime.reap_gone_fleets, self.docker, self.fleet)
        if reaped:
            log.warning("removed %d containers of fleets that are gone: %s", len(reaped), ", ".join(reaped))
        self._in_background(lifetime.reap_every(self._blocking, self.docker, self.fleet, REAP_INTERVAL))
        if self._owner is not None:
            self._in_background(lifetime.watch_owner(self._owner, self._end_with_owner))
        threading.Thread(
            target=self._oom.follow_events,
            args=(lambda: self.docker, self.config.id),
            name="rock-oom-events",
            daemon=True,
        ).start()
        self._heartbeats = asyncio.get_running_loop().create_task(self._heartbeat_loop())
        self._disk_checks = asyncio.get_running_loop().create_task(self._disk.run(self.docker))

    async def _end_with_owner(self) -> None:
        """The private fleet's owner is gone: start nothing more, let the creates under way finish, remove
        every container of this worker, then stop."""
        self._ending = True
        for _ in range(600):
            if not self._starting:
                break
            await asyncio.sleep(0.1)
        found = await self._blocking(containers.labelled, self.docker, self.config.id)
        await asyncio.gather(*(self._remove(entry[0]) for entry in found), return_exceptions=True)
        os.kill(os.getpid(), signal.SIGTERM)

    async def close(self) -> None:
        """Stop heartbeating; containers stay, to be adopted when a worker with this id starts again."""
        self._closing = True
        for task in list(self._background):
            task.cancel()
        for task in (self._heartbeats, self._disk_checks):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._oom.close()
        for client in self._clients.values():
            await client.aclose()
        await self._http.aclose()
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._heartbeat_pool.shutdown(wait=False, cancel_futures=True)
        self._id_lock.close()

    async def reconcile(self) -> None:
        """Adopt this worker's running containers whose rocklet answers; remove the rest.

        Containers that never started, or whose rocklet is silent, go at once. Stopped ones stay until the
        next heartbeat reports them (so an OOM-kill is not lost), and the admin's reply has them removed.
        """
        found = await self._blocking(containers.labelled, self.docker, self.config.id)
        await self._disk.release_others({entry[0] for entry in found})
        await asyncio.gather(*(self._adopt(*entry) for entry in found))
        known = {entry[0] for entry in found}
        for leftover in self.config.run_dir.iterdir():
            if leftover.name not in known:
                await self._blocking(socket_dir.release_host_dir, leftover)

    async def _adopt(self, sandbox_id: str, container_id: str, state: str, disk: int | None) -> None:
        if state == "created":  # the worker died between creating and starting it
            await self._remove(sandbox_id)
            return
        if state != "running":
            return
        client = self._rocklet_client(sandbox_id)
        try:
            await client.wait_ready(timeout=5.0)
            await self._seal_rocklet(sandbox_id)  # sealed already, unless the last worker died creating it
        except (RockletError, SandboxFailed) as exc:
            log.warning("removing sandbox %s: its rocklet does not answer (%s)", sandbox_id, exc)
            await client.aclose()
            await self._remove(sandbox_id)
            return
        log.info("adopted sandbox %s", sandbox_id)
        self._clients[sandbox_id] = client
        self._oom.watch(sandbox_id, container_id)
        if disk is not None:
            await self._disk.follow(self.docker, sandbox_id, disk)

    def _rocklet_client(self, sandbox_id: str) -> RockletClient:
        async def rocklet_pid() -> int:
            return await asyncio.shield(self._lookup_rocklet_pid(sandbox_id))

        return RockletClient(
            self.config.run_dir / sandbox_id / ROCKLET_SOCKET,
            token=socket_dir.rocklet_token(self._rocklet_key, sandbox_id),
            rocklet_pid=rocklet_pid,
        )

    def _lookup_rocklet_pid(self, sandbox_id: str) -> asyncio.Future[int]:
        """The container's init pid (its rocklet), looked up once: every connection's peer must be it."""
        lookup = self._rocklet_pids.get(sandbox_id)
        if lookup is None or (lookup.done() and (lookup.cancelled() or lookup.exception() is not None)):
            lookup = asyncio.ensure_future(self._blocking(containers.init_pid, self.docker, sandbox_id))
            self._rocklet_pids[sandbox_id] = lookup
        return lookup

    # sandboxes --------------------------------------------------------------------------------------
    async def create(
        self, sandbox_id: str, spec: SandboxSpec, owner: str, label_ttl: float | None = None
    ) -> CreatedOnWorker:
        """Start the sandbox's container; `label_ttl`: seconds its lifetime label gives it before another
        fleet may take it for abandoned (rock.worker.lifetime), the spec's ttl unless the admin says more."""
        from rock.runtime import rocklet_container_env

        if sandbox_id in self._clients or sandbox_id in self._starting:
            raise BadRequest(f"sandbox {sandbox_id} already exists on worker {self.config.id}")
        if self._ending:
            raise SandboxFailed("the fleet's owner is gone; the worker stops", FailureReason.START_ERROR)
        if spec.network == "packages" and not self._packages.available:
            raise BadRequest(
                f"worker {self.config.id} has no package cache for network='packages'; start the fleet with "
                "`rock admin serve --package-cache DIR`, or ask for network='none'"
            )
        self._starting.add(sandbox_id)
        host_dir = self.config.run_dir / sandbox_id
        try:
            image = await self._image(spec)
            token = socket_dir.rocklet_token(self._rocklet_key, sandbox_id)
            try:
                await self._blocking(socket_dir.make_host_dir, host_dir, spec.user)
                await self._blocking(socket_dir.write_token, host_dir, token, spec.user)
            except OSError as exc:
                await self._blocking(socket_dir.release_host_dir, host_dir)
                raise SandboxFailed(
                    f"the worker could not prepare the sandbox's socket folder: {exc}",
                    FailureReason.START_ERROR,
                ) from exc
            start = functools.partial(
                containers.start_container,
                self.docker,
                sandbox_id=sandbox_id,
                worker_id=self.config.id,
                fleet=self.fleet,
                owner=owner,
                image=image,
                spec=spec,
                runtime_dir=self.runtime_dir,
                host_dir=host_dir,
                command=socket_dir.rocklet_command(),
                env=rocklet_container_env() | self._package_env(spec),
                labels=lifetime.sandbox_labels(label_ttl or spec.ttl, self._owner),
            )
            try:
                container_id = await self._disk.start(
                    lambda **limit: self._blocking(start, **limit), sandbox_id, spec.disk_bytes
                )
            except docker.errors.APIError as exc:
                await self._remove(sandbox_id)
                raise SandboxFailed(
                    f"docker could not start the sandbox: {exc.explanation or exc}", FailureReason.START_ERROR
                ) from exc
            if spec.egress:
                try:
                    await self._blocking(containers.restrict_egress, self.docker, sandbox_id, spec.egress)
                except containers.EgressError as exc:
                    await self._remove(sandbox_id)
                    raise SandboxFailed(str(exc), FailureReason.START_ERROR) from exc
            self._lookup_rocklet_pid(sandbox_id)  # while the rocklet starts, for its first connection
            client = self._rocklet_client(sandbox_id)
            try:
                await self._start_rocklet(client, sandbox_id, spec)
                await self._seal_rocklet(sandbox_id)
                if spec.network == "packages":
                    await self._connect_packages(client, sandbox_id, host_dir, spec)
            except Exception:
                await client.aclose()
                await self._remove(sandbox_id)
                raise
            self._clients[sandbox_id] = client
            self._specs[sandbox_id] = spec
            self._oom.watch(sandbox_id, container_id)
            # Off the create's path: finding the upper layer is one more Docker call.
            self._in_background(self._follow_disk(sandbox_id, spec.disk_bytes))
            return CreatedOnWorker(host_dir=str(host_dir))
        finally:
            self._starting.discard(sandbox_id)

    async def create_share(self, sandboxes: list[CreateOnWorker]) -> list[ShareMember]:
        """Start a group create's share of this worker at once; each member started or failed on its own."""
        outcomes = await asyncio.gather(
            *(self.create(s.id, s.spec, s.owner, s.label_ttl) for s in sandboxes), return_exceptions=True
        )
        return [share_member(s.id, outcome) for s, outcome in zip(sandboxes, outcomes, strict=True)]

    async def _start_rocklet(self, client: RockletClient, sandbox_id: str, spec: SandboxSpec) -> None:
        """Wait for the rocklet to answer and set the CPU limit; SandboxFailed if either goes wrong.

        A limit below one CPU is set once the rocklet's socket exists, that is once the interpreter has
        started at full speed (under a 0.25-CPU quota it would take four times as long), and while the
        rocklet opens its first shell; no user command runs before both are done. A larger one was set at
        create (`containers.limit_at_create`).
        """
        socket = client.socket_path
        deadline = time.monotonic() + spec.start_timeout
        # The socket file every 10 ms (a cheap stat): finer than wait_ready's back-off, which can overshoot.
        while not os.path.exists(socket) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        limit = (
            asyncio.sleep(0)
            if containers.limit_at_create(spec.cpus)
            else self._blocking(containers.limit_cpus, self.docker, sandbox_id, spec.cpus)
        )
        ready, limited = await asyncio.gather(
            client.wait_ready(timeout=max(deadline - time.monotonic(), 0.1)), limit, return_exceptions=True
        )
        if isinstance(ready, RockletError):
            failure = await self._diagnose(sandbox_id, spec)
            if failure is not None:
                raise failure from ready
            raise SandboxFailed(
                f"the sandbox's rocklet did not answer within {spec.start_timeout:g} s; raise start_timeout "
                "or check that the image runs (`rock image ls`)",
                FailureReason.START_TIMEOUT,
            ) from ready
        if isinstance(limited, docker.errors.APIError):
            raise SandboxFailed(
                f"docker could not limit the sandbox's CPUs: {limited.explanation or limited}",
                FailureReason.START_ERROR,
            ) from limited
        for outcome in (ready, limited):
            if isinstance(outcome, BaseException):
                raise outcome

    async def _seal_rocklet(self, sandbox_id: str) -> None:
        """Make the rocklet's folder read-only (its socket is there, its token read): from now on no process
        of the sandbox can replace the socket."""
        try:
            await self._blocking(socket_dir.seal_rocklet_dir, self.config.run_dir / sandbox_id)
        except OSError as exc:
            raise SandboxFailed(
                f"the worker could not seal the rocklet's folder: {exc}", FailureReason.START_ERROR
            ) from exc

    async def _image(self, spec: SandboxSpec) -> str:
        """The local image to run: built from `build_context`, or `image` resolved through the alias table."""
        from rock.images import ImageError, build_image, resolve_image
        from rock.images.build import BuildLimits

        try:
            if spec.build_context is not None:  # the admin has checked it is one of the operator's folders
                return await self._blocking(build_image, spec.build_context, limits=BuildLimits.of(spec))
            return await self._blocking(resolve_image, spec.image, client=self.docker)
        except ImageError as exc:
            raise SandboxFailed(str(exc), FailureReason.IMAGE_ERROR) from exc

    async def remove(self, sandbox_id: str) -> None:
        had_client = sandbox_id in self._clients
        if not await self._remove(sandbox_id) and not had_client:
            raise SandboxNotFound(f"worker {self.config.id} has no sandbox {sandbox_id}")

    def _package_env(self, spec: SandboxSpec) -> dict[str, str]:
        from rock.worker.packages import sandbox_env

        return sandbox_env() if spec.network == "packages" else {}

    async def _connect_packages(
        self, client: RockletClient, sandbox_id: str, host_dir: Path, spec: SandboxSpec
    ) -> None:
        """The `packages` policy: the cache's sockets in the socket folder, the rocklet's forwarders to them,
        and (for a root sandbox, the only one apt works in) apt's proxy setting."""
        from rock.worker.packages import APT_CONF, APT_CONF_PATH

        await self._packages.attach(sandbox_id, host_dir)
        for port, target in self._packages.forwards():
            await client.start_forwarder(port, target_socket=target)
        if spec.is_root and self.config.apt_cache:
            # Images without apt have no apt.conf.d: the setting is written only where apt is.
            command = f"[ -d /etc/apt/apt.conf.d ] && printf '%s' '{APT_CONF}' > {APT_CONF_PATH} || true"
            await client.exec(["sh", "-c", command], timeout=30)

    async def set_network(self, sandbox_id: str, network: str) -> str:
        """Narrow the sandbox's network to `none`, or give back the one it was made with; returns it."""
        from rock.worker.phase_network import switch

        spec = self._specs.get(sandbox_id)
        if spec is None:
            raise SandboxNotFound(f"worker {self.config.id} has no sandbox {sandbox_id}")
        current = self._networks.get(sandbox_id, spec.network)
        host_dir = self.config.run_dir / sandbox_id
        now = await switch(self.docker, self._packages, sandbox_id, host_dir, spec.network, current, network)
        self._networks[sandbox_id] = now
        return now

    async def _remove(self, sandbox_id: str) -> bool:
        client = self._clients.pop(sandbox_id, None)
        self._specs.pop(sandbox_id, None)
        self._networks.pop(sandbox_id, None)
        self._rocklet_pids.pop(sandbox_id, None)
        self._oom.forget(sandbox_id)
        # Why a sandbox was given up on (disk, socket) stays known: a call still in flight reports it.
        self._disk.forget(sandbox_id)
        self._removing.add(sandbox_id)
        try:
            await self._packages.detach(sandbox_id)
            if client is not None:
                await client.aclose()
            await self._disk.release(sandbox_id)
            return await self._blocking(
                containers.remove_container, self.docker, sandbox_id, self.config.run_dir / sandbox_id
            )
        finally:
            self._removing.discard(sandbox_id)

    def client(self, sandbox_id: str) -> RockletClient:
        client = self._clients.get(sandbox_id)
        if client is None:
            raise SandboxNotFound(f"worker {self.config.id} has no sandbox {sandbox_id}")
        return client

    async def _diagnose(self, sandbox_id: str, spec: SandboxSpec | None) -> SandboxFailed | None:
        """Why a sandbox stopped answering: OOM-killed or exited (with its log), or None if it still runs."""
        if sandbox_id in self._disk.exceeded:
            return SandboxFailed(self._disk.exceeded[sandbox_id], FailureReason.DISK_QUOTA)
        state = await self._blocking(containers.inspect_state, self.docker, sandbox_id)
        if state is None:
            return SandboxFailed(f"the container of sandbox {sandbox_id} is gone", FailureReason.WORKER_LOST)
        if self._oom.killed(sandbox_id):
            state["OOMKilled"] = True
        if state.get("Running") and not state.get("OOMKilled"):
            return None
        status, detail = containers.describe_stop(state, spec.memory if spec else None)
        if status == "oom_killed":
            return SandboxFailed(detail, FailureReason.OOM_KILLED)
        tail = await self._blocking(containers.logs_tail, self.docker, sandbox_id)
        return SandboxFailed(f"{detail}; last output:\n{tail}" if tail else detail, FailureReason.EXITED)

    async def call(self, sandbox_id: str, op: Callable[[RockletClient], Any]) -> Any:
        """Run one rocklet call; if the rocklet is gone, say why (OOM-killed, exited) as SandboxFailed."""
        client = self.client(sandbox_id)
        try:
            result = await op(client)
        except SocketTampered as exc:
            log.warning("sandbox %s replaced its rocklet's socket: %s", sandbox_id, exc)
            self._tampered[sandbox_id] = str(exc)
            raise SandboxFailed(str(exc), FailureReason.SOCKET_TAMPERED) from exc
        except RockletUnavailable as exc:
            failure = await self._diagnose(sandbox_id, self._specs.get(sandbox_id))
            if failure is not None:
                raise failure from exc
            raise
        if self._oom.killed(sandbox_id):
            failure = await self._diagnose(sandbox_id, self._specs.get(sandbox_id))
            if failure is not None:
                raise failure
        return result

    # heartbeats (rock.worker.heartbeats) ------------------------------------------------------------
    @property
    def sandbox_count(self) -> int:
        """Sandboxes this worker holds a rocklet connection to."""
        return len(self._clients)

    @property
    def fleet(self) -> str:
        """The fleet label of this worker's containers: a fingerprint of the worker credential."""
        return hashlib.sha256(self.token.encode()).hexdigest()[:16]

    async def _follow_disk(self, sandbox_id: str, limit: int) -> None:
        await self._disk.follow(self.docker, sandbox_id, limit)
        if sandbox_id not in self._clients:  # removed while its upper layer was being looked up
            self._disk.forget(sandbox_id)

    def _in_background(self, coro: Coroutine[Any, Any, object]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
