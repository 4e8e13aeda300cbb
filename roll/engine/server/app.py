"""The OpenAI-compatible HTTP API over any `InferenceEngine`: `create_app(engine, loaded)`.

The app starts the engine when it starts serving and shuts it down when it stops, so the engine's decode loop
runs on the server's event loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from roll.engine.protocol import InferenceEngine
from roll.engine.server.chat import create_chat_completion
from roll.engine.server.completions import create_completion
from roll.engine.server.errors import install_error_handlers
from roll.engine.server.metrics import ServerMetrics
from roll.engine.server.schemas import ChatCompletionRequest, CompletionRequest
from roll.engine.server.state import ServedModel, ServerState


def create_app(engine: InferenceEngine, loaded: ServedModel) -> FastAPI:
    """An app serving `loaded` (named by its `model_id`) through `engine`."""
    state = ServerState(engine=engine, loaded=loaded, metrics=ServerMetrics(engine))

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await engine.start()
        try:
            yield
        finally:
            await engine.shutdown()

    app = FastAPI(title="ROLL inference server", lifespan=lifespan)
    app.state.roll = state
    install_error_handlers(app)

    app.add_middleware(RequestCounter, metrics=state.metrics)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        stats = engine.stats()
        return {
            "status": "ok",
            "model": state.model_id,
            "weight_version": stats.weight_version,
            "sleeping": stats.sleeping,
            "running": stats.running,
            "waiting": stats.waiting,
        }

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(state.metrics.render(), media_type="text/plain; version=0.0.4")

    def model_card() -> dict[str, Any]:
        return {
            "id": state.model_id,
            "object": "model",
            "created": state.created,
            "owned_by": "roll",
            "max_model_len": engine.max_context,
        }

    @app.get("/v1/models")
    async def list_models() -> dict[str, Any]:
        return {"object": "list", "data": [model_card()]}

    @app.get("/v1/models/{model:path}")
    async def retrieve_model(model: str) -> dict[str, Any]:
        state.check_model(model)
        return model_card()

    @app.post("/v1/chat/completions", response_model=None)
    async def chat_completions(
        body: ChatCompletionRequest, request: Request
    ) -> JSONResponse | StreamingResponse:
        return await create_chat_completion(state, body, request)

    @app.post("/v1/completions", response_model=None)
    async def completions(body: CompletionRequest, request: Request) -> JSONResponse | StreamingResponse:
        return await create_completion(state, body, request)

    return app


class RequestCounter:
    """Counts requests by route and status.

    Plain ASGI on purpose: FastAPI's `@app.middleware("http")` wraps `receive` so that handlers no longer see
    the client disconnect, which is what aborts abandoned requests.
    """

    def __init__(self, app: ASGIApp, metrics: ServerMetrics) -> None:
        self._app = app
        self._metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        status = 500

        async def send_with_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self._app(scope, receive, send_with_status)
        finally:
            # The matched route's template, not the raw path, keeps the label values bounded.
            endpoint = getattr(scope.get("route"), "path", "unmatched")
            self._metrics.requests.labels(endpoint, str(status)).inc()
