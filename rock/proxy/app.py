"""The proxy's HTTP API: `create_app(config)`.

Model routes (agents): `POST /v1/chat/completions` (episode by `X-Rock-Episode` or `X-Rock-Sandbox` header),
`POST /episodes/{id}/v1/chat/completions`, `GET /v1/models` (and under `/episodes/{id}`).
Control routes (rollout workers): `POST /episodes`, `GET /episodes/{id}`, `POST /episodes/{id}/end`,
`PUT|DELETE /sandboxes/{id}/socket`, `GET /health`.

An agent that hangs up (its own timeout, a killed episode) stops the call it was waiting for: the proxy
cancels its upstream request, whose closed connection makes the engine server abort the generation (so a
loaded engine does not keep decoding for nobody), and nothing is recorded for it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from rock.proxy.episodes import EpisodeStore
from rock.proxy.errors import ProxyError
from rock.proxy.recording import DeployMode, Recorder, ReplayMode
from rock.proxy.sockets import SocketListeners
from rock.proxy.sse import completion_events
from rock.proxy.train import Sampling, TrainMode, check_messages
from rock.proxy.types import (
    EPISODE_HEADER,
    SANDBOX_HEADER,
    AttachSocket,
    EpisodeOpen,
    EpisodeRecord,
    ProxyConfig,
)
from rock.proxy.upstream import Upstream

DISCONNECT_POLL_S = 0.2
T = TypeVar("T")


def create_app(config: ProxyConfig) -> FastAPI:
    store = EpisodeStore(config.max_chunks_per_episode)
    upstream = Upstream(config) if config.upstream_url else None
    train = (
        TrainMode(upstream, store, config.max_tokens, Sampling.of(config))
        if config.mode == "train" and upstream
        else None
    )
    deploy = (
        DeployMode(upstream, Recorder(config.record_path)) if config.mode == "deploy" and upstream else None
    )
    replay = ReplayMode(config.replay_path) if config.mode == "replay" and config.replay_path else None
    listeners: SocketListeners

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await listeners.close()
            if upstream is not None:
                await upstream.aclose()

    app = FastAPI(title="ROCK ModelProxyService", lifespan=lifespan)
    listeners = SocketListeners(app)
    app.state.episodes = store

    @app.exception_handler(ProxyError)
    async def proxy_error(_: Request, error: ProxyError) -> JSONResponse:
        return error.response()

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "mode": config.mode}

    @app.get("/v1/models")
    @app.get("/episodes/{episode_id}/v1/models")
    async def models() -> dict[str, Any]:
        name = config.model or (await upstream.model() if upstream and config.mode == "train" else "proxy")
        return {"object": "list", "data": [{"id": name, "object": "model", "owned_by": "rock-proxy"}]}

    @app.post("/episodes")
    async def open_episode(body: EpisodeOpen) -> dict[str, Any]:
        return {"episode_id": store.open(body).record.episode_id}

    @app.get("/episodes/{episode_id}")
    async def get_episode(episode_id: str) -> EpisodeRecord:
        return store.get(episode_id).record

    @app.post("/episodes/{episode_id}/end")
    async def end_episode(episode_id: str) -> EpisodeRecord:
        record = store.end(episode_id)
        store.drop(episode_id)
        return record

    @app.put("/sandboxes/{sandbox_id}/socket")
    async def attach(sandbox_id: str, body: AttachSocket) -> dict[str, Any]:
        await listeners.attach(sandbox_id, body.path, body.episode_id)
        return {"sandbox_id": sandbox_id, "path": body.path}

    @app.delete("/sandboxes/{sandbox_id}/socket")
    async def detach(sandbox_id: str) -> dict[str, Any]:
        return {"sandbox_id": sandbox_id, "detached": await listeners.detach(sandbox_id)}

    async def chat(
        request: Request, body: dict[str, Any], episode_id: str | None, sandbox_id: str | None
    ) -> Response:
        check_messages(body)
        stream = bool(body.get("stream"))
        if train is not None:
            episode = (
                store.get(episode_id) if episode_id else store.for_sandbox(sandbox_id) if sandbox_id else None
            )
            if episode is None:
                raise ProxyError(
                    "train mode needs the episode: call /episodes/{id}/v1/chat/completions or send the "
                    f"{EPISODE_HEADER} header",
                    code="episode_required",
                )
            answer = await unless_disconnected(
                request, train.complete({k: v for k, v in body.items() if k != "stream"}, episode)
            )
        elif deploy is not None:
            if episode_id is None and sandbox_id is not None:
                episode_id = _try_sandbox_episode(store, sandbox_id)
            if stream:
                lines = await deploy.open_stream(body, episode_id)
                return StreamingResponse(lines, media_type="text/event-stream")
            answer = await unless_disconnected(request, deploy.complete(body, episode_id))
        else:
            assert replay is not None
            answer = replay.complete()
        if stream:
            return StreamingResponse(completion_events(answer), media_type="text/event-stream")
        return JSONResponse(answer)

    @app.post("/v1/chat/completions", response_model=None)
    async def chat_by_header(request: Request) -> Response:
        return await chat(
            request,
            await _json(request),
            request.headers.get(EPISODE_HEADER),
            request.headers.get(SANDBOX_HEADER),
        )

    @app.post("/episodes/{episode_id}/v1/chat/completions", response_model=None)
    async def chat_by_route(episode_id: str, request: Request) -> Response:
        return await chat(request, await _json(request), episode_id, None)

    app.state.listeners = listeners
    return app


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    """`work`'s result, or, when the agent hangs up first, `work` cancelled (closing its upstream request)
    and a 499 error (which nobody reads: the agent is gone)."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.create_task(_wait_for_disconnect(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, ProxyError):
                await task
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    if task.cancelled():
        raise ProxyError(
            "the agent closed the connection before the answer; the upstream request was aborted",
            status=499,
            code="client_closed_request",
        )
    return task.result()


async def _wait_for_disconnect(request: Request) -> None:
    while not await request.is_disconnected():
        await asyncio.sleep(DISCONNECT_POLL_S)


async def _json(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError as error:
        raise ProxyError(f"the request body is not JSON ({error}); send an OpenAI chat request") from error
    if not isinstance(body, dict):
        raise ProxyError("the request body must be a JSON object (an OpenAI chat request)")
    return body


def _try_sandbox_episode(store: EpisodeStore, sandbox_id: str) -> str | None:
    try:
        return store.for_sandbox(sandbox_id).record.episode_id
    except ProxyError:
        return None
