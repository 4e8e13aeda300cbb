"""The admin's HTTP API (FastAPI). Errors are `ErrorBody` JSON so the SDK can raise them again."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated

import httpx
from fastapi import Depends, FastAPI, Header, Path, Query, Request, Response
from fastapi.responses import StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import AfterValidator
from starlette.background import BackgroundTask

from rock.admin import responses as R
from rock.admin.config import KeyPolicy
from rock.admin.control import health_of
from rock.admin.service import Admin
from rock.admin.ui import install_fleet_page
from rock.envs.gem_image import GemImageError, gem_context_folder
from rock.envs.hub import EnvCaller, EnvHub
from rock.envs.routes import env_router, install_env_errors
from rock.request_limits import client_watch
from rock.sdk import checks
from rock.sdk.errors import ImageFailed, WorkerUnavailable
from rock.sdk.types import (
    CreateGroupRequest,
    CreateSandboxRequest,
    ExecRequest,
    ForwardRequest,
    GroupCreated,
    ImageInfo,
    ImageRequest,
    NetworkRequest,
    RunRequest,
    SandboxInfo,
    SessionRequest,
    WorkerCapacity,
    WorkerInfo,
)
from rock.serving import bearer_token, install_error_handlers
from rock.worker.contract import GROUP_PATH, HEARTBEAT_PATH, Heartbeat, HeartbeatReply

_SLACK = 30.0
"""Seconds a forwarded call may take beyond its command's own timeout."""


SandboxPath = Annotated[str, Query(min_length=1, max_length=checks.MAX_PATH), AfterValidator(checks.no_nul)]
SessionName = Annotated[str, Path(min_length=1, max_length=128), AfterValidator(checks.no_nul)]
FileMode = Annotated[int | None, Query(ge=0, le=0o7777)]


# The dependencies are coroutines: FastAPI runs a plain `def` one on a worker thread, and that hand-off (a
# thread-pool trip and a wake-up of the event loop per request) cost more of the admin's CPU than the check.
async def caller(request: Request, authorization: Annotated[str | None, Header()] = None) -> KeyPolicy:
    return request.app.state.admin.auth.identify(authorization)


Caller = Annotated[KeyPolicy, Depends(caller)]


async def env_caller(request: Request, authorization: Annotated[str | None, Header()] = None) -> EnvCaller:
    """The env routes' caller: owns the environments it makes, whose sandboxes are made with its own key."""
    policy = request.app.state.admin.auth.identify(authorization)
    return EnvCaller(name=policy.name, api_key=bearer_token(authorization) if policy.key else None)


async def worker_caller(request: Request, authorization: Annotated[str | None, Header()] = None) -> None:
    request.app.state.admin.auth.check_worker(authorization)


def _passthrough(response) -> Response:  # type: ignore[no-untyped-def]
    return Response(
        response.content, status_code=response.status_code, media_type=response.headers.get("content-type")
    )


def _created(model: SandboxInfo | GroupCreated) -> Response:
    return Response(model.model_dump_json(), status_code=201, media_type="application/json")


def _streamed(response: httpx.Response) -> StreamingResponse:
    """A worker's answer passed on piece by piece (a download of any size holds no memory here)."""
    return StreamingResponse(
        response.aiter_raw(),
        status_code=response.status_code,
        media_type=response.headers.get("content-type"),
        background=BackgroundTask(response.aclose),
    )


def create_app(admin: Admin, envs_admin_url: str | None = None) -> FastAPI:
    """The admin's API; with `envs_admin_url` (this admin's own URL) also the GEM env routes under /envs,
    whose environments get their sandboxes from this admin (with the caller's key checked first)."""
    hub = EnvHub(envs_admin_url) if envs_admin_url else None

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await admin.start()
        yield
        await admin.close()

    app = FastAPI(title="ROCK admin", lifespan=lifespan)
    app.state.admin = admin
    install_error_handlers(app)
    install_fleet_page(app, admin, caller)  # /ui: read-only, its data behind the API's own keys
    if hub is not None:
        app.include_router(env_router(hub, env_caller))
        install_env_errors(app)
        app.state.env_hub = hub
        with contextlib.suppress(GemImageError):  # without gem-llm no GEM env is made, nor its image built
            admin.config.limits.allow_build_context(gem_context_folder())

    @app.get("/health")
    async def health() -> dict[str, object]:
        return health_of(admin)

    @app.get("/metrics", responses=R.METRICS)
    async def metrics(_caller: Caller) -> Response:
        return Response(generate_latest(admin.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    # The creates answer with the model's own JSON: FastAPI would validate the returned model again and
    # serialize it through its encoder, a second pass over every sandbox (and its spec) answered.
    @app.post("/v1/sandboxes", status_code=201, responses=R.CREATE, response_model=SandboxInfo)
    async def create(body: CreateSandboxRequest, who: Caller, request: Request) -> Response:
        async with client_watch(request) as gone:
            return _created(await admin.create(body, who, gone))

    @app.post(GROUP_PATH, status_code=201, responses=R.CREATE, response_model=GroupCreated)
    async def create_group(body: CreateGroupRequest, who: Caller, request: Request) -> Response:
        """N sandboxes of one spec; 201 with every member, running or why not (`summary` says which)."""
        async with client_watch(request) as gone:
            return _created(await admin.create_group(body, who, gone))

    @app.post("/v1/images", responses=R.errors(ImageFailed, WorkerUnavailable, json_body=True))
    async def ensure_image(body: ImageRequest, _caller: Caller) -> ImageInfo:
        """Build a folder (one of the operator's build roots) or resolve an image name on a worker: its tag,
        working directory and notes."""
        return await admin.images.make(body)

    @app.get("/v1/sandboxes", responses=R.errors())
    async def list_sandboxes(who: Caller, all: bool = False) -> list[SandboxInfo]:
        return await admin.list(who, include_deleted=all)

    @app.get("/v1/sandboxes/{sandbox_id}", responses=R.errors(*R.SANDBOX))
    async def get(sandbox_id: str, who: Caller) -> SandboxInfo:
        return await admin.get(sandbox_id, who)

    @app.delete("/v1/sandboxes/{sandbox_id}", responses=R.errors(*R.SANDBOX))
    async def delete(sandbox_id: str, who: Caller) -> SandboxInfo:
        return await admin.delete(sandbox_id, who)

    @app.post("/v1/sandboxes/{sandbox_id}/run", responses=R.COMMAND)
    async def run(sandbox_id: str, body: RunRequest, who: Caller) -> Response:
        return _passthrough(
            await admin.forward(
                sandbox_id, who, "POST", "run", json=body.model_dump(), timeout=body.timeout + _SLACK
            )
        )

    @app.post("/v1/sandboxes/{sandbox_id}/exec", responses=R.COMMAND)
    async def exec_(sandbox_id: str, body: ExecRequest, who: Caller) -> Response:
        return _passthrough(
            await admin.forward(
                sandbox_id, who, "POST", "exec", json=body.model_dump(), timeout=body.timeout + _SLACK
            )
        )

    @app.post("/v1/sandboxes/{sandbox_id}/sessions", status_code=201, responses=R.FORWARD)
    async def create_session(sandbox_id: str, body: SessionRequest, who: Caller) -> Response:
        return _passthrough(await admin.forward(sandbox_id, who, "POST", "sessions", json=body.model_dump()))

    @app.delete("/v1/sandboxes/{sandbox_id}/sessions/{name}", responses=R.FORWARD)
    async def close_session(sandbox_id: str, name: SessionName, who: Caller) -> Response:
        return _passthrough(await admin.forward(sandbox_id, who, "DELETE", f"sessions/{name}"))

    @app.get("/v1/sandboxes/{sandbox_id}/files", responses=R.READ)
    async def read_file(sandbox_id: str, path: SandboxPath, who: Caller) -> Response:
        return _passthrough(await admin.forward(sandbox_id, who, "GET", "files", params={"path": path}))

    @app.put("/v1/sandboxes/{sandbox_id}/files", responses=R.FILES)
    async def write_file(
        sandbox_id: str, path: SandboxPath, request: Request, who: Caller, mode: FileMode = None
    ) -> Response:
        params: dict[str, object] = {"path": path} if mode is None else {"path": path, "mode": mode}
        return _passthrough(
            await admin.forward(
                sandbox_id, who, "PUT", "files", params=params, content=request.stream(), timeout=600.0
            )
        )

    @app.post("/v1/sandboxes/{sandbox_id}/upload", responses=R.FILES)
    async def upload(sandbox_id: str, dest: SandboxPath, request: Request, who: Caller) -> Response:
        return _passthrough(
            await admin.forward(
                sandbox_id,
                who,
                "POST",
                "upload",
                params={"dest": dest},
                content=request.stream(),
                timeout=600.0,
            )
        )

    @app.get("/v1/sandboxes/{sandbox_id}/download", responses=R.DOWNLOAD)
    async def download(sandbox_id: str, path: SandboxPath, who: Caller) -> Response:
        return _streamed(
            await admin.forward(
                sandbox_id, who, "GET", "download", params={"path": path}, timeout=600.0, stream=True
            )
        )

    @app.put("/v1/sandboxes/{sandbox_id}/network", responses=R.FORWARD)
    async def set_network(sandbox_id: str, body: NetworkRequest, who: Caller) -> Response:
        """Narrow a sandbox's network to `none` for a phase, or give back the one it was made with."""
        return _passthrough(await admin.forward(sandbox_id, who, "PUT", "network", json=body.model_dump()))

    @app.post("/v1/sandboxes/{sandbox_id}/forward", responses=R.FORWARD)
    async def forward(sandbox_id: str, body: ForwardRequest, who: Caller) -> Response:
        return _passthrough(await admin.forward(sandbox_id, who, "POST", "forward", json=body.model_dump()))

    @app.post(HEARTBEAT_PATH, dependencies=[Depends(worker_caller)], responses=R.WORKER)
    async def heartbeat(beat: Heartbeat) -> HeartbeatReply:
        return admin.heartbeat(beat)

    @app.get("/v1/workers", responses=R.errors())
    async def workers(_caller: Caller) -> list[WorkerInfo]:
        out = []
        for w in admin.scheduler.workers.values():
            used = admin.scheduler.used(w.id)
            out.append(
                WorkerInfo(
                    id=w.id,
                    url=w.url,
                    capacity=w.capacity,
                    used=WorkerCapacity(cpus=used.cpus, memory=used.memory, slots=used.slots),
                    sandboxes=used.slots,
                    last_heartbeat=_wall(w.last_heartbeat),
                    images=None if w.images is None else len(w.images),
                )
            )
        return out

    return app


def _wall(monotonic_at: float):  # type: ignore[no-untyped-def]
    import time
    from datetime import UTC, datetime

    return datetime.fromtimestamp(time.time() - (time.monotonic() - monotonic_at), UTC)
