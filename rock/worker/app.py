"""The worker's HTTP API (FastAPI), called by the admin. Rocklet errors become `ErrorBody` JSON."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, Query, Request, Response
from fastapi.responses import StreamingResponse
from starlette.background import BackgroundTask

from rock.rocklet.errors import RemoteFileNotFound as RockletFileNotFound
from rock.rocklet.errors import RockletError
from rock.sdk.errors import (
    BadRequest,
    RemoteFileNotFound,
    RockError,
    SandboxRequestError,
    Unauthorized,
    WorkerUnavailable,
)
from rock.sdk.types import NetworkRequest
from rock.serving import bearer_token, error_response, install_error_handlers, same_secret
from rock.worker import image_builds, image_transfer
from rock.worker.contract import (
    GROUP_PATH,
    HEALTH_PATH,
    IMAGE_ENSURE_PATH,
    IMAGES_PATH,
    CreatedOnWorker,
    CreatedShare,
    CreateOnWorker,
    CreateShare,
    ExecRequest,
    ForwardRequest,
    ImageInfo,
    ImageRequest,
    RunRequest,
    SessionAck,
    SessionRequest,
    WorkerSandbox,
)
from rock.worker.service import WorkerService


def as_rock_error(exc: RockletError) -> RockError:
    if isinstance(exc, RockletFileNotFound):
        return RemoteFileNotFound(str(exc))
    if exc.status >= 500:
        return WorkerUnavailable(f"the sandbox's rocklet failed: {exc}")
    return SandboxRequestError(str(exc))


def create_worker_app(
    worker: WorkerService, port_of: Callable[[], int], manage_lifespan: bool = True
) -> FastAPI:
    """`port_of` gives the bound port once the server listens (the worker heartbeats its URL)."""

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await worker.start(port_of())
        yield
        await worker.close()

    app = FastAPI(title="ROCK worker", lifespan=lifespan if manage_lifespan else None)
    install_error_handlers(app)
    app.add_exception_handler(RockletError, lambda _r, exc: error_response(as_rock_error(exc)))  # type: ignore[arg-type]

    async def check_token(authorization: Annotated[str | None, Header()] = None) -> None:
        token = bearer_token(authorization)
        if token is None or not same_secret(worker.token, token):
            raise Unauthorized(
                "this worker answers only its admin: send 'Authorization: Bearer TOKEN' with the fleet's "
                "worker credential"
            )

    def json_of(model: Any) -> Response:
        return Response(
            model.model_dump_json() if hasattr(model, "model_dump_json") else model,
            media_type="application/json",
        )

    async def call(sandbox_id: str, op: Callable[[Any], Awaitable[Any]]) -> Any:
        return await worker.call(sandbox_id, op)

    app.router.dependencies.append(Depends(check_token))

    @app.get(HEALTH_PATH)
    async def health() -> dict[str, object]:
        return {"status": "ok", "id": worker.config.id, "sandboxes": worker.sandbox_count}

    @app.post("/v1/sandboxes", status_code=201)
    async def create(body: CreateOnWorker) -> CreatedOnWorker:
        return await worker.create(body.id, body.spec, body.owner, body.label_ttl)

    @app.post(GROUP_PATH, status_code=201)
    async def create_share(body: CreateShare) -> CreatedShare:
        return CreatedShare(members=await worker.create_share(body.sandboxes))

    @app.get(IMAGES_PATH + "/archive")
    async def save_image(name: str) -> StreamingResponse:
        if name not in await worker._blocking(image_transfer.local_tags, worker.docker):
            raise BadRequest(f"worker {worker.config.id} has no image {name!r}")
        chunks = image_transfer.save_chunks(worker.docker, name)
        return StreamingResponse(chunks, media_type="application/x-tar")

    @app.post(IMAGES_PATH, status_code=201)
    async def load_image(request: Request) -> dict[str, list[str]]:
        archive = await image_transfer.spool(request.stream(), worker.config.state_dir)
        return {"loaded": await worker._blocking(image_transfer.load_file, worker.docker, archive)}

    @app.post(IMAGE_ENSURE_PATH)
    async def ensure_image(body: ImageRequest) -> ImageInfo:
        return await image_builds.ensure(worker, body)

    @app.get("/v1/sandboxes")
    async def list_sandboxes() -> list[WorkerSandbox]:
        return (await worker.list_sandboxes())[1]

    @app.delete("/v1/sandboxes/{sandbox_id}", status_code=204)
    async def delete(sandbox_id: str) -> None:
        await worker.remove(sandbox_id)

    @app.post("/v1/sandboxes/{sandbox_id}/run")
    async def run(sandbox_id: str, body: RunRequest) -> Response:
        return json_of(
            await call(sandbox_id, lambda c: c.run(body.cmd, session=body.session, timeout=body.timeout))
        )

    @app.post("/v1/sandboxes/{sandbox_id}/exec")
    async def exec_(sandbox_id: str, body: ExecRequest) -> Response:
        return json_of(
            await call(
                sandbox_id, lambda c: c.exec(body.cmd, timeout=body.timeout, cwd=body.cwd, env=body.env)
            )
        )

    @app.post("/v1/sandboxes/{sandbox_id}/sessions", status_code=201)
    async def create_session(sandbox_id: str, body: SessionRequest) -> SessionAck:
        await call(sandbox_id, lambda c: c.create_session(body.name, env=body.env, cwd=body.cwd))
        return SessionAck(name=body.name)

    @app.delete("/v1/sandboxes/{sandbox_id}/sessions/{name}")
    async def close_session(sandbox_id: str, name: str) -> SessionAck:
        await call(sandbox_id, lambda c: c.close_session(name))
        return SessionAck(name=name)

    @app.get("/v1/sandboxes/{sandbox_id}/files")
    async def read_file(sandbox_id: str, path: str) -> Response:
        data = await call(sandbox_id, lambda c: c.read_file(path))
        return Response(data, media_type="application/octet-stream")

    @app.put("/v1/sandboxes/{sandbox_id}/files")
    async def write_file(
        sandbox_id: str, path: str, request: Request, mode: Annotated[int | None, Query()] = None
    ) -> dict[str, str]:
        await call(sandbox_id, lambda c: c.write_file(path, request.stream(), mode=mode))
        return {"path": path}

    @app.post("/v1/sandboxes/{sandbox_id}/upload")
    async def upload(sandbox_id: str, dest: str, request: Request) -> dict[str, str]:
        await call(sandbox_id, lambda c: c.upload(request.stream(), dest))
        return {"dest": dest}

    @app.get("/v1/sandboxes/{sandbox_id}/download")
    async def download(sandbox_id: str, path: str) -> StreamingResponse:
        archive = await call(sandbox_id, lambda c: c.open_download(path))
        return StreamingResponse(
            archive.aiter_raw(), media_type="application/x-tar", background=BackgroundTask(archive.aclose)
        )

    @app.put("/v1/sandboxes/{sandbox_id}/network")
    async def set_network(sandbox_id: str, body: NetworkRequest) -> dict[str, str]:
        return {"network": await worker.set_network(sandbox_id, body.network)}

    @app.post("/v1/sandboxes/{sandbox_id}/forward")
    async def forward(sandbox_id: str, body: ForwardRequest) -> Response:
        return json_of(
            await call(sandbox_id, lambda c: c.start_forwarder(body.port, target_socket=body.target_socket))
        )

    return app
