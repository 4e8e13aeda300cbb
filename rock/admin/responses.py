"""The status codes each admin route can answer with, for its OpenAPI (`responses=` on the routes).

Every error body is `ErrorBody`; its description lists the error types (`ErrorBody.type`) behind the code.
A test runs schemathesis against the served schema and fails on any status code missing here.
"""

from __future__ import annotations

from typing import Any

from rock.observation import Observation
from rock.sdk.errors import (
    BadRequest,
    CapacityExceeded,
    Forbidden,
    PayloadTooLarge,
    QuotaExceeded,
    RemoteFileNotFound,
    RockError,
    SandboxFailed,
    SandboxNotFound,
    SandboxNotRunning,
    SandboxRequestError,
    Unauthorized,
    WorkerUnavailable,
)
from rock.sdk.types import ErrorBody

Responses = dict[int | str, dict[str, Any]]


def errors(*kinds: type[RockError], json_body: bool = False) -> Responses:
    """`responses=` for a route that can raise `kinds`, besides what every route can (401, 413, 422); with
    `json_body`, also the 400 for a body that is not even text."""
    by_status: dict[int, list[str]] = {}
    for kind in (Unauthorized, PayloadTooLarge, BadRequest, *kinds):
        doc = (kind.__doc__ or kind.__name__).strip().splitlines()[0]
        by_status.setdefault(kind.status, []).append(f"{kind.__name__}: {doc}")
    if json_body:
        by_status.setdefault(400, []).append("RockError: the request body could not be read as JSON text")
    return {
        status: {"model": ErrorBody, "description": "; ".join(lines)}
        for status, lines in sorted(by_status.items())
    }


def body(content_type: str, description: str) -> Responses:
    """A 200 whose body is not JSON."""
    return {200: {"content": {content_type: {"schema": {"type": "string"}}}, "description": description}}


SANDBOX = (SandboxNotFound,)
"""Routes that name a sandbox."""
FORWARDED = (SandboxNotFound, SandboxNotRunning, SandboxFailed, WorkerUnavailable, SandboxRequestError)
"""Routes that reach into a running sandbox through its worker and rocklet."""

CREATE = errors(CapacityExceeded, QuotaExceeded, SandboxFailed, json_body=True)
COMMAND = {200: {"model": Observation}} | errors(*FORWARDED, json_body=True)
FORWARD = errors(*FORWARDED, json_body=True)
FILES = errors(*FORWARDED, RemoteFileNotFound)
READ = body("application/octet-stream", "the file's bytes") | FILES
DOWNLOAD = body("application/x-tar", "a tar archive of the path") | FILES
METRICS = body("text/plain", "Prometheus text format") | errors()
WORKER = errors(Forbidden, json_body=True)
