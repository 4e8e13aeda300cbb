"""A worker's heartbeats (part of WorkerService): its containers listed with their status, the strays of
lost workers of its fleet on the same Docker host, its images, sent to the admin's control listener
(rock.admin.control) once the admin named it; the admin's answer says which containers to remove."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rock.worker import containers, image_transfer, socket_dir
from rock.worker.contract import Heartbeat, HeartbeatReply, WorkerSandbox, heartbeat_url

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    import docker
    import httpx

    from rock.rocklet.client import RockletClient
    from rock.sdk.types import WorkerCapacity
    from rock.worker.config import WorkerConfig
    from rock.worker.disk import DiskWatch
    from rock.worker.oom import OomWatch

log = logging.getLogger("rock.worker")
LISTING_WAIT = 1.0
"""Seconds a heartbeat waits for the container listing before it goes without it."""


class Heartbeats:
    """WorkerService's heartbeat half; the attributes below are WorkerService's."""

    if TYPE_CHECKING:
        config: WorkerConfig
        url: str
        fleet: str
        token: str
        docker: docker.DockerClient
        _heartbeat_pool: ThreadPoolExecutor
        _heartbeat_url: str
        _http: httpx.AsyncClient
        _clients: dict[str, RockletClient]
        _tampered: dict[str, str]
        _removing: set[str]
        _starting: set[str]
        _disk: DiskWatch
        _oom: OomWatch
        _listing: asyncio.Future[tuple[datetime, list[WorkerSandbox]]] | None

        def capacity(self) -> WorkerCapacity: ...
        async def _blocking(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any: ...
        async def _remove(self, sandbox_id: str) -> bool: ...
        def _in_background(self, coro: Coroutine[Any, Any, object]) -> None: ...

    async def _list_strays(self) -> dict[str, Path]:
        return await asyncio.get_running_loop().run_in_executor(
            self._heartbeat_pool, containers.strays, self.docker, self.fleet, self.config.id
        )

    async def _remove_stray(self, sandbox_id: str, host_dir: Path) -> None:
        log.info("removing sandbox %s: a lost worker's container the admin no longer wants", sandbox_id)
        await self._blocking(containers.remove_container, self.docker, sandbox_id, host_dir)

    async def list_sandboxes(self) -> tuple[datetime, list[WorkerSandbox]]:
        """(when listed, this worker's containers with their status), leaving out ones being removed."""
        listed_at = datetime.now(UTC)
        oom_killed = self._oom.killed_ids()
        found = await asyncio.get_running_loop().run_in_executor(
            self._heartbeat_pool, containers.list_sandboxes, self.docker, self.config.id, oom_killed
        )
        # A container that stopped took its socket with it; only a running one can have replaced it.
        running = {
            s.id: self._clients[s.id].socket_path
            for s in found
            if s.status == "running" and s.id in self._clients
        }
        for sandbox_id, problem in socket_dir.replaced_sockets(running).items():
            if sandbox_id not in self._tampered:
                log.warning("sandbox %s: %s", sandbox_id, problem)
                self._tampered[sandbox_id] = problem
        return listed_at, [self._judged(s) for s in found if s.id not in self._removing]

    def _judged(self, sandbox: WorkerSandbox) -> WorkerSandbox:
        """The container's status, or why the worker gave up on it (over its disk, socket replaced)."""
        if sandbox.id in self._disk.exceeded:
            return WorkerSandbox(id=sandbox.id, status="disk_quota", detail=self._disk.exceeded[sandbox.id])
        if sandbox.id in self._tampered:
            return WorkerSandbox(id=sandbox.id, status="socket_tampered", detail=self._tampered[sandbox.id])
        return sandbox

    async def heartbeat(self) -> HeartbeatReply:
        """Tell the admin this worker lives, with its containers when listing them was quick.

        Docker answers a container list only after the containers being started, so under a burst of
        creates the listing can take long: the heartbeat then goes without it (liveness must not wait) and
        the listing goes with a later one.
        """
        if self._listing is None:
            self._listing = asyncio.ensure_future(self.list_sandboxes())
        done, _ = await asyncio.wait({self._listing}, timeout=LISTING_WAIT)
        listed_at, sandboxes, strays, images = datetime.now(UTC), None, {}, None
        if done:
            listing, self._listing = self._listing, None
            try:
                listed_at, sandboxes = listing.result()
                strays = await self._list_strays()
                images = await asyncio.get_running_loop().run_in_executor(
                    self._heartbeat_pool, image_transfer.local_tags, self.docker
                )
            except Exception as exc:
                log.warning("listing this worker's containers failed: %r", exc)
        beat = Heartbeat(
            worker_id=self.config.id,
            listed_at=listed_at,
            url=self.url,
            capacity=self.capacity(),
            sandboxes=sandboxes,
            images=images,
            strays=sorted(strays),
        )
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {self.token}"}
        url, self._heartbeat_url = self._heartbeat_url, heartbeat_url(self.config.admin_url, None)
        response = await self._http.post(url, content=beat.model_dump_json(), headers=headers)
        if not response.is_success:
            raise RuntimeError(f"the admin answered {response.status_code}: {response.text[:300]}")
        reply = HeartbeatReply.model_validate_json(response.content)
        # The next beat goes to the admin's control listener, where it never waits behind creates.
        self._heartbeat_url = heartbeat_url(self.config.admin_url, reply.heartbeat_port)
        for sandbox_id in reply.remove:
            if sandbox_id in strays:
                self._in_background(self._remove_stray(sandbox_id, strays[sandbox_id]))
            elif sandbox_id not in self._starting and sandbox_id not in self._removing:
                log.info("removing sandbox %s: the admin no longer wants it", sandbox_id)
                self._in_background(self._remove(sandbox_id))
        return reply

    async def _heartbeat_loop(self) -> None:
        failures = 0
        while True:
            try:
                await self.heartbeat()
                failures = 0
            except Exception as exc:
                failures += 1
                if failures in (1, 10) or failures % 100 == 0:
                    log.warning(
                        "heartbeat to %s failed (%d in a row): %r", self.config.admin_url, failures, exc
                    )
            # Right after start the admin may still be coming up: retry fast for the first few seconds.
            await asyncio.sleep(0.25 if 0 < failures < 20 else self.config.heartbeat_interval)
