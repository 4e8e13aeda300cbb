"""Typed rocklet errors: the error hierarchy of the worker<->rocklet wire. The server sends
`{"error": {"type": ..., "message": ...}}`; the client raises the same class again. Standard library only:
the server imports this module too.

The admin API's wire has its own hierarchy, rock.sdk.errors (BadRequest 422, Unauthorized 401, ...), and the
worker turns a rocklet error into one of those (rock.worker.app.as_rock_error). They are two wires, not one
error defined twice: only rock.rocklet is shipped into the sandbox's runtime, so these cannot import the
SDK's classes, and their statuses are the rocklet's own (a malformed rocklet request is a 400)."""


class RockletError(Exception):
    """Base class for every error the rocklet or its client raises."""

    status = 500


class RockletUnavailable(RockletError):
    """The rocklet's socket does not answer (not started yet, crashed, or the sandbox is gone)."""

    status = 503


class SocketTampered(RockletError):
    """The rocklet's socket path holds something other than a socket (the sandbox replaced it, with a symlink
    to another socket of the host, say): the client refuses to connect through it."""

    status = 503


class BadRequest(RockletError):
    """The request is malformed: a missing field or a value of the wrong type."""

    status = 400


class SessionNotFound(RockletError):
    """No shell session has this name."""

    status = 404


class SessionExists(RockletError):
    """A shell session with this name is already open."""

    status = 409


class RemoteFileNotFound(RockletError):
    """The path does not exist inside the sandbox."""

    status = 404


class RemoteFileError(RockletError):
    """Reading, writing or unpacking a file inside the sandbox failed (permissions, not a file, bad tar)."""

    status = 422


class ShellUnavailable(RockletError):
    """The image has no shell, so sessions (and exec of a command string) cannot run."""

    status = 422


class SandboxExhausted(RockletError):
    """No process could be started: the sandbox is at its process or memory limit."""

    status = 503


class Unauthorized(RockletError):
    """The request did not carry this sandbox's token."""

    status = 401


class ForwarderError(RockletError):
    """The TCP forwarder could not listen on the requested port."""

    status = 409


ERROR_TYPES: dict[str, type[RockletError]] = {
    cls.__name__: cls
    for cls in (
        RockletError,
        RockletUnavailable,
        SocketTampered,
        BadRequest,
        SessionNotFound,
        SessionExists,
        RemoteFileNotFound,
        RemoteFileError,
        ShellUnavailable,
        SandboxExhausted,
        ForwarderError,
        Unauthorized,
    )
}
