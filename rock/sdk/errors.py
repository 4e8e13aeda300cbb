"""Typed errors of the ROCK fleet.

The server sends `ErrorBody(type=<class name>)`; the SDK raises the same class again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rock.sdk.types import FailureReason, Observation


class RockError(Exception):
    """Base of every ROCK error; `status` is the HTTP status the admin answers with."""

    status = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(RockError):
    """The request is malformed or over a limit (the message names which)."""

    status = 422


class Unauthorized(RockError):
    status = 401


class Forbidden(RockError):
    """The credential is known but not allowed here (e.g. an API key on a worker route)."""

    status = 403


class PayloadTooLarge(RockError):
    """The request body is over the server's limit (the message gives it)."""

    status = 413


class SandboxNotFound(RockError):
    status = 404


class SandboxNotRunning(RockError):
    """The sandbox exists but is pending, stopped or deleted."""

    status = 409


class CapacityExceeded(RockError):
    """No worker had room before the create's queue timeout; retry after `retry_after` seconds."""

    status = 429

    def __init__(self, message: str, retry_after: float = 5.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class QuotaExceeded(CapacityExceeded):
    """The API key already holds as many sandboxes, CPUs or bytes of memory as its quota allows."""


class SandboxFailed(RockError):
    """The sandbox failed; `reason` says why (image error, OOM-killed, start timeout, worker lost, ...)."""

    status = 503

    def __init__(self, message: str, reason: FailureReason | str | None = None) -> None:
        super().__init__(message)
        self.reason = reason


class ImageFailed(RockError):
    """An image asked of the fleet (`Images.ensure`) did not build or resolve; the message says why, with
    the tail of the build log."""

    status = 422


class CommandTimeout(RockError):
    """A command ran past its timeout and was killed; its session stays usable.

    `observation` holds the output it printed before.
    """

    status = 504

    def __init__(self, message: str, observation: Observation | None = None) -> None:
        super().__init__(message)
        self.observation = observation


class WorkerUnavailable(RockError):
    """The worker that holds the sandbox did not answer."""

    status = 502


class AdminUnavailable(RockError):
    """The admin did not answer (stopped, restarting, or the connection broke mid-call): retry once it is
    back.

    Sandboxes outlive an admin restart. A command whose call broke this way may still have run: its output
    is lost, never handed to a later call.
    """

    status = 503


class RemoteFileNotFound(RockError):
    """The path does not exist inside the sandbox."""

    status = 404


class SandboxRequestError(RockError):
    """The sandbox refused the request (unknown or duplicate session, unreadable file, bad tar, ...)."""

    status = 400


ERROR_TYPES: dict[str, type[RockError]] = {
    cls.__name__: cls
    for cls in (
        RockError,
        BadRequest,
        Unauthorized,
        Forbidden,
        PayloadTooLarge,
        SandboxNotFound,
        SandboxNotRunning,
        CapacityExceeded,
        QuotaExceeded,
        SandboxFailed,
        ImageFailed,
        CommandTimeout,
        WorkerUnavailable,
        AdminUnavailable,
        RemoteFileNotFound,
        SandboxRequestError,
    )
}


def error_from_response(status: int, content: bytes, retry_after: str | None, source: str) -> RockError:
    """The RockError an admin or worker sent as `ErrorBody` JSON (a generic RockError for other bodies)."""
    from rock.sdk.types import ErrorBody

    try:
        body = ErrorBody.model_validate_json(content)
    except ValueError:
        text = content[:500].decode(errors="replace")
        return RockError(f"HTTP {status} from {source}: {text}")
    cls = ERROR_TYPES.get(body.type, RockError)
    if issubclass(cls, SandboxFailed):
        return cls(body.message, body.reason)
    if issubclass(cls, CapacityExceeded):
        return cls(body.message, float(retry_after or 5))
    return cls(body.message)
