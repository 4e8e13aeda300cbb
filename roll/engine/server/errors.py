"""OpenAI-style error bodies, `{"error": {"message", "type", "param", "code"}}`, with 4xx for bad input."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger(__name__)


class APIError(Exception):
    """An error answered to the client as an OpenAI error body."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.type = type
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(APIError)
    async def _api_error(_: Request, error: APIError) -> JSONResponse:
        return JSONResponse(error.body(), status_code=error.status)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, error: RequestValidationError) -> JSONResponse:
        return JSONResponse(validation_error(error.errors()).body(), status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, error: StarletteHTTPException) -> JSONResponse:
        api = APIError(
            str(error.detail),
            status=error.status_code,
            code="not_found" if error.status_code == 404 else None,
        )
        return JSONResponse(api.body(), status_code=error.status_code)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, error: Exception) -> JSONResponse:
        log.exception("unexpected server error")
        api = APIError(f"internal server error: {error!r}", status=500, type="server_error")
        return JSONResponse(api.body(), status_code=500)


def validation_error(errors: Any) -> APIError:
    """The first pydantic/FastAPI validation error as a 400, naming the parameter."""
    first = next(iter(errors)) if errors else {"loc": (), "msg": "invalid request"}
    location = [str(part) for part in first.get("loc", ()) if part != "body"]
    param = ".".join(location) or None
    message = str(first.get("msg", "invalid request")).removeprefix("Value error, ")
    if first.get("type") == "extra_forbidden":
        message = f"Unrecognized request argument supplied: {param}"
    elif first.get("type") == "json_invalid":
        message, param = "The request body is not valid JSON.", None
    elif param:
        message = f"{param}: {message}"
    return APIError(message, param=param, code="invalid_value" if param else None)
