"""Simulated workers for the control-plane benchmark: real worker processes that speak the admin↔worker
contract (rock.worker.contract) with the fleet's worker credential, heartbeat like a worker, and hold their
sandboxes in a `SimulatedRuntime` instead of Docker.

`SimulatedRuntime` makes no container: a create waits a start latency drawn from ones measured on real Docker
(create + start of a container on this machine), a remove a removal latency, and the sandbox then exists only
as an entry in memory. It measures the admin, not Docker; nothing here runs a command.

`python -m rock.worker.simulated --admin URL --count K --prefix P --latencies FILE --slots S --stats FILE`
runs K simulated workers (ids P-0 ... P-(K-1), each with its own HTTP server on a free loopback port) in one
process; the worker credential comes from ROCK_WORKER_TOKEN. On SIGUSR1 and SIGTERM it writes each sandbox's
simulated start latency to the stats file (JSON {sandbox id: seconds}); SIGTERM then stops it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import httpx
from fastapi import Depends, FastAPI, Header

from rock.sdk.errors import SandboxNotFound, Unauthorized
from rock.serving import (
    QuietSignalsServer,
    bearer_token,
    bind,
    install_error_handlers,
    run_server,
    same_secret,
    uvicorn_config,
)
from rock.worker.contract import (
    GROUP_PATH,
    HEALTH_PATH,
    CreatedOnWorker,
    CreatedShare,
    CreateOnWorker,
    CreateShare,
    Heartbeat,
    HeartbeatReply,
    WorkerCapacity,
    WorkerSandbox,
    heartbeat_url,
    share_member,
)


class SimulatedRuntime:
    """Sandboxes as entries in memory, started and removed after latencies measured on real Docker."""

    def __init__(self, start_latencies: list[float], remove_latencies: list[float], seed: str) -> None:
        self._start, self._remove = start_latencies, remove_latencies
        self._random = random.Random(seed)
        self.sandboxes: dict[str, float] = {}
        """Sandbox id -> the simulated start latency it waited."""

    async def create(self, sandbox_id: str) -> None:
        latency = self._random.choice(self._start)
        await asyncio.sleep(latency)
        self.sandboxes[sandbox_id] = latency

    async def remove(self, sandbox_id: str) -> bool:
        if sandbox_id not in self.sandboxes:
            return False
        await asyncio.sleep(self._random.choice(self._remove))
        return self.sandboxes.pop(sandbox_id, None) is not None

    def listing(self) -> list[WorkerSandbox]:
        return [WorkerSandbox(id=sandbox_id, status="running") for sandbox_id in self.sandboxes]


class SimulatedWorker:
    def __init__(
        self, worker_id: str, admin_url: str, token: str, runtime: SimulatedRuntime, slots: int
    ) -> None:
        self.id, self.admin_url, self.token, self.runtime = worker_id, admin_url, token, runtime
        self.capacity = WorkerCapacity(cpus=slots * 1.0, memory=slots * 1024**3, slots=slots)
        self.started: dict[str, float] = {}
        self.sock = bind("127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def app(self) -> FastAPI:
        async def check(authorization: Annotated[str | None, Header()] = None) -> None:
            token = bearer_token(authorization)
            if token is None or not same_secret(self.token, token):
                raise Unauthorized("this simulated worker answers only its admin's worker credential")

        app = FastAPI(title=f"simulated worker {self.id}", dependencies=[Depends(check)])
        install_error_handlers(app)

        @app.get(HEALTH_PATH)
        async def health() -> dict[str, object]:
            return {"status": "ok", "id": self.id, "sandboxes": len(self.runtime.sandboxes)}

        @app.post("/v1/sandboxes", status_code=201)
        async def create(body: CreateOnWorker) -> CreatedOnWorker:
            await self.runtime.create(body.id)
            self.started[body.id] = self.runtime.sandboxes[body.id]
            return CreatedOnWorker(host_dir=f"/simulated/{self.id}/{body.id}")

        @app.post(GROUP_PATH, status_code=201)
        async def create_share(body: CreateShare) -> CreatedShare:
            outcomes = await asyncio.gather(*(create(one) for one in body.sandboxes), return_exceptions=True)
            return CreatedShare(
                members=[share_member(one.id, o) for one, o in zip(body.sandboxes, outcomes, strict=True)]
            )

        @app.delete("/v1/sandboxes/{sandbox_id}", status_code=204)
        async def delete(sandbox_id: str) -> None:
            if not await self.runtime.remove(sandbox_id):
                raise SandboxNotFound(f"simulated worker {self.id} has no sandbox {sandbox_id}")

        return app

    async def heartbeats(self, http: httpx.AsyncClient, interval: float) -> None:
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        url = heartbeat_url(self.admin_url, None)
        while True:
            beat = Heartbeat(
                worker_id=self.id,
                listed_at=datetime.now(UTC),
                url=self.url,
                capacity=self.capacity,
                sandboxes=self.runtime.listing(),
            )
            try:
                response = await http.post(url, content=beat.model_dump_json(), headers=headers)
                reply = HeartbeatReply.model_validate_json(response.content)
                for sandbox_id in reply.remove:
                    self.runtime.sandboxes.pop(sandbox_id, None)
                url = heartbeat_url(self.admin_url, reply.heartbeat_port)  # the control listener next
            except (httpx.HTTPError, ValueError):
                url = heartbeat_url(self.admin_url, None)  # the admin is restarting: its main port again
            await asyncio.sleep(interval)


async def run(args: argparse.Namespace) -> None:
    latencies = json.loads(Path(args.latencies).read_text())
    token = os.environ["ROCK_WORKER_TOKEN"]
    workers = [
        SimulatedWorker(
            f"{args.prefix}-{i}",
            args.admin,
            token,
            SimulatedRuntime(latencies["start"], latencies["remove"], seed=f"{args.prefix}-{i}"),
            args.slots,
        )
        for i in range(args.count)
    ]
    servers = [QuietSignalsServer(uvicorn_config(w.app(), "warning")) for w in workers]
    stop = asyncio.Event()

    def dump() -> None:
        stats = {sid: latency for w in workers for sid, latency in w.started.items()}
        Path(args.stats).write_text(json.dumps(stats))

    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, dump)
    # A client per worker, as each real worker has its own: httpx's pool checks every connection it holds
    # (syscalls each) on every request, and one pool shared by the process's workers made a heartbeat cost
    # ~3.6 ms of CPU under load (py-spy: much of it that check), more than the admin spent answering it.
    async with contextlib.AsyncExitStack() as clients:
        http = [await clients.enter_async_context(httpx.AsyncClient(timeout=30.0)) for _ in workers]
        tasks = [
            asyncio.create_task(s.serve(sockets=[w.sock])) for s, w in zip(servers, workers, strict=True)
        ]
        tasks += [
            asyncio.create_task(w.heartbeats(h, args.heartbeat_interval))
            for w, h in zip(workers, http, strict=True)
        ]
        await stop.wait()
        dump()
        for server in servers:
            server.should_exit = True
        for task in tasks[len(servers) :]:
            task.cancel()
        await asyncio.wait(tasks, timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description="simulated ROCK workers (no Docker) for the control plane")
    parser.add_argument("--admin", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--latencies", required=True)
    parser.add_argument("--slots", type=int, required=True)
    parser.add_argument("--stats", required=True)
    parser.add_argument("--heartbeat-interval", type=float, default=2.0)
    started = time.monotonic()
    run_server(run(parser.parse_args()))
    print(f"simulated workers ran {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
