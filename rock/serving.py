"""What the admin's and the workers' HTTP servers share: `ErrorBody` error responses, listening sockets,
uvicorn settings and bearer-credential checks. Neither server imports the other; both import this."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import os
import socket
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

import uvicorn
from fastapi import Response
from fastapi.exceptions import RequestValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException

from rock.request_limits import BodyLimit
from rock.sdk.errors import BadRequest, CapacityExceeded, RockError
from rock.sdk.types import ErrorBody

T = TypeVar("T")
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def error_response(exc: RockError) -> Response:
    body = ErrorBody(type=type(exc).__name__, message=exc.message, reason=getattr(exc, "reason", None))
    headers = (
        {"Retry-After": str(max(1, round(exc.retry_after)))} if isinstance(exc, CapacityExceeded) else None
    )
    return Response(
        body.model_dump_json(), status_code=exc.status, media_type="application/json", headers=headers
    )


def validation_error(exc: RequestValidationError) -> Response:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in e['loc'] if p != 'body')}: {e['msg']}" for e in exc.errors()
    )
    return error_response(BadRequest(f"invalid request: {problems}"))


def http_error(exc: HTTPException) -> Response:
    """Starlette's own refusals (no such route, wrong method, a body over the limit) as `ErrorBody` too."""
    kind = "PayloadTooLarge" if exc.status_code == 413 else "RockError"
    body = ErrorBody(type=kind, message=str(exc.detail))
    return Response(body.model_dump_json(), status_code=exc.status_code, media_type="application/json")


def install_error_handlers(app: Starlette) -> None:
    """`ErrorBody` answers for every error, and the request body limits (`rock.request_limits`)."""
    app.add_exception_handler(RockError, lambda _r, exc: error_response(exc))  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, lambda _r, exc: validation_error(exc))  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, lambda _r, exc: http_error(exc))  # type: ignore[arg-type]
    app.add_middleware(BodyLimit)


def bearer_token(authorization: str | None) -> str | None:
    scheme, _, token = (authorization or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def same_secret(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def bind(host: str, port: int) -> socket.socket:
    """A listening socket (port 0 picks a free one), so the port is known before the server starts."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP: asyncio sets TCP_NODELAY on accepted sockets only when the proto says TCP; without
    # it every keep-alive response waits ~40 ms on Nagle + delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OSError(
            f"cannot listen on {host}:{port} ({exc.strerror}); pick another --port or stop the "
            "process holding it"
        ) from exc
    sock.listen(1024)
    sock.set_inheritable(True)
    return sock


class QuietSignalsServer(uvicorn.Server):
    """A uvicorn server that leaves SIGINT/SIGTERM to another server in the same process."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


STACKS = {"plain": ("asyncio", "h11"), "fast": ("uvloop", "httptools")}
"""The event loop and HTTP parser of ROCK's servers, chosen by ROCK_SERVER_STACK (what each costs:
benchmarks/rock_control_plane.py --server-stack)."""


def server_stack() -> tuple[str, str]:
    name = os.environ.get("ROCK_SERVER_STACK", "plain")
    if name not in STACKS:
        raise ValueError(f"ROCK_SERVER_STACK={name!r}: choose one of {', '.join(STACKS)}")
    return STACKS[name]


def run_server(main: Coroutine[Any, Any, T]) -> T:
    """asyncio.run, on uvloop's event loop when ROCK_SERVER_STACK says so."""
    if server_stack()[0] == "uvloop":
        try:
            import uvloop
        except ImportError as error:
            raise RuntimeError(
                "ROCK_SERVER_STACK=fast needs uvloop and httptools: pip install 'ale[fast]', or unset it"
            ) from error

        return uvloop.run(main)
    return asyncio.run(main)


def uvicorn_config(app: object, log_level: str) -> uvicorn.Config:
    loop, http = server_stack()  # the loop for Server.run(); serve() runs on the caller's (run_server)
    return uvicorn.Config(
        app,
        loop=loop,  # type: ignore[arg-type]
        http=http,  # type: ignore[arg-type]
        log_level=log_level,
        lifespan="on",
        timeout_graceful_shutdown=5,  # type: ignore[arg-type]
        # Far longer than any client's keepalive_expiry (httpx's 5 s, the admin's 10 s): the client, not the
        # server, closes an idle connection, so a request never races the server's close on a reused one (the
        # server resets it: a ReadError). A client's expiry counts from when it has read the answer, which a
        # starved client does long after the server sent it: with 30 s, 5 of 4,000 creates at once failed so
        # at load 27.
        timeout_keep_alive=300,
        access_log=False,
    )
