"""The admin's HTTP calls to its workers, with the fleet's worker credential: one connection pool per worker.

httpx's pool rescans every connection it holds (a syscall on each idle one) and every request queued in it
whenever one is taken or given back. One pool for the whole fleet (256 connections, creates queued beyond)
spent two thirds of the admin's CPU there in a burst of 2,000 creates on 100 workers; a pool per worker holds
few, and a semaphore of the pool's size keeps requests from queueing inside it.
"""

from __future__ import annotations

import asyncio
import ssl

import httpx

from rock.sdk.errors import WorkerUnavailable, error_from_response

PER_WORKER = 256
"""Requests in flight to one worker at once (long commands hold theirs); more wait their turn."""


class WorkerUnreachable(WorkerUnavailable):
    """No connection could be made: the worker has started nothing for this request."""


class WorkerCalls:
    def __init__(self, token: str) -> None:
        self._token = token
        self._tls = ssl.create_default_context()
        """Shared by the pools: making one loads the system's certificates (~20 ms)."""
        self._pools: dict[str, tuple[str, httpx.AsyncClient, asyncio.Semaphore]] = {}

    async def _pool(self, worker_id: str, url: str) -> tuple[httpx.AsyncClient, asyncio.Semaphore]:
        known = self._pools.get(worker_id)
        if known is None or known[0] != url:
            client = httpx.AsyncClient(
                verify=self._tls,
                timeout=httpx.Timeout(30.0),
                # Idle connections close on the admin's side first (before uvicorn's 30 s), so a reused one
                # never races the server's close (a ReadError under load).
                limits=httpx.Limits(max_connections=PER_WORKER, keepalive_expiry=10.0),
            )
            self._pools[worker_id] = (url, client, asyncio.Semaphore(PER_WORKER))
            if known is not None:  # the worker came back on another address
                await known[1].aclose()
            known = self._pools[worker_id]
        return known[1], known[2]

    async def send(
        self,
        worker_id: str,
        url: str,
        method: str,
        path: str,
        *,
        timeout: float | None,
        headers: dict[str, str] | None = None,
        stream: bool = False,
        **kwargs: object,
    ) -> httpx.Response:
        """The worker's successful answer; with `stream`, its body not read yet (the caller closes it).
        Raises WorkerUnreachable, WorkerUnavailable (no answer), or the worker's error as a RockError."""
        client, gate = await self._pool(worker_id, url)
        headers = {**(headers or {}), "Authorization": f"Bearer {self._token}"}
        try:
            request = client.build_request(method, url + path, headers=headers, timeout=timeout, **kwargs)  # type: ignore[arg-type]
            async with gate:
                response = await client.send(request, stream=stream)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise WorkerUnreachable(f"worker {worker_id} at {url} cannot be reached: {exc!r}") from exc
        except httpx.HTTPError as exc:
            raise WorkerUnavailable(f"worker {worker_id} at {url} did not answer: {exc!r}") from exc
        if response.is_success:
            return response
        if stream:
            await response.aread()
            await response.aclose()
        raise error_from_response(
            response.status_code, response.content, response.headers.get("Retry-After"), url
        )

    async def forget(self, worker_id: str) -> None:
        """Close the pool of a worker that is gone."""
        known = self._pools.pop(worker_id, None)
        if known is not None:
            await known[1].aclose()

    async def aclose(self) -> None:
        for worker_id in list(self._pools):
            await self.forget(worker_id)
