"""The environment routes as a router, to mount in any FastAPI app (the admin's, or `rock envs serve`'s).

POST /envs/make, GET /envs/list, POST /envs/{handle}/reset, .../step, .../close.
Handlers are plain functions: FastAPI runs them in its thread pool, as environment calls block.
"""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations, which name the
# dependency `identify` local to env_router.
from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse

from rock.envs.hub import ANYONE, EnvCaller, EnvHub
from rock.sdk.env_errors import EnvError
from rock.sdk.env_types import (
    EnvErrorBody,
    EnvList,
    MakeRequest,
    MakeResponse,
    ResetRequest,
    ResetResponse,
    StepRequest,
    StepResponse,
)

_NOT_JSON = "the request body could not be read as JSON text"
_INVALID = "UnknownEnvId (no such GEM id), or a request that does not fit the schema"
_AUTH = {
    401: {"description": "Unauthorized: the admin needs an API key ('Authorization: Bearer KEY')"},
    413: {"description": "PayloadTooLarge: the request body is over the server's limit"},
}
MAKE = _AUTH | {
    400: {"description": f"EnvError: the environment's sandbox could not start; or {_NOT_JSON}"},
    422: {"description": _INVALID},
}
CALL = _AUTH | {
    400: {"description": f"EnvError: the environment failed; or {_NOT_JSON}"},
    404: {"model": EnvErrorBody, "description": "EnvNotFound: no open environment has this handle"},
    422: {"description": "a request that does not fit the schema"},
}
"""Each code's body is `EnvErrorBody`, or `ErrorBody` for what the server refuses before the route (a
body that is no JSON, over the limit, or off the schema), so only 404's has one schema."""


def _anyone() -> EnvCaller:
    return ANYONE


def env_router(hub: EnvHub, identify: Callable[..., EnvCaller] = _anyone) -> APIRouter:
    """The routes; `identify` (a FastAPI dependency) names the caller, who owns the environments it makes
    and sees no other caller's (default: one caller, for a host without API keys)."""
    router = APIRouter(prefix="/envs")
    Caller = Annotated[EnvCaller, Depends(identify)]

    @router.post("/make", responses=MAKE)
    def make(body: MakeRequest, who: Caller) -> MakeResponse:
        return MakeResponse(handle=hub.make(body.env_id, body.kwargs, who), env_id=body.env_id)

    @router.get("/list", responses=_AUTH)
    def list_envs(who: Caller) -> EnvList:
        return hub.list(who)

    @router.post("/{handle}/reset", responses=CALL)
    def reset(handle: str, body: ResetRequest, who: Caller) -> ResetResponse:
        return ResetResponse.model_validate(hub.reset(handle, body.seed, who))

    @router.post("/{handle}/step", responses=CALL)
    def step(handle: str, body: StepRequest, who: Caller) -> StepResponse:
        return StepResponse.model_validate(hub.step(handle, body.action, who))

    @router.post("/{handle}/close", responses=CALL)
    def close(handle: str, who: Caller) -> dict[str, str]:
        hub.close(handle, who)
        return {"handle": handle, "closed": "true"}

    return router


def install_env_errors(app: FastAPI) -> None:
    @app.exception_handler(EnvError)
    async def env_error(_: Request, error: EnvError) -> JSONResponse:
        return JSONResponse(
            {"error": {"type": type(error).__name__, "message": str(error)}}, status_code=error.status
        )


def create_app(admin_url: str | None = None) -> FastAPI:
    """A standalone env service (`rock envs serve`); its environments close when it stops."""
    from collections.abc import AsyncIterator
    from contextlib import asynccontextmanager

    hub = EnvHub(admin_url)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            hub.close_all()

    app = FastAPI(title="ROCK environments (GEM API)", lifespan=lifespan)
    app.include_router(env_router(hub))
    install_env_errors(app)
    app.state.env_hub = hub
    return app
