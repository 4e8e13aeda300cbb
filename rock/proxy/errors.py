"""OpenAI-style error bodies for the proxy's answers."""

from __future__ import annotations

from fastapi.responses import JSONResponse


class ProxyError(Exception):
    """A request the proxy cannot answer; the message says why and what to do."""

    def __init__(self, message: str, status: int = 400, code: str = "invalid_request") -> None:
        super().__init__(message)
        self.status = status
        self.code = code

    def response(self) -> JSONResponse:
        body = {"error": {"message": str(self), "type": "proxy_error", "code": self.code}}
        return JSONResponse(body, status_code=self.status)
