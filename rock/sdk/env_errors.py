"""Errors of hosted environments: each maps to an HTTP status on the routes and back in the client."""

from __future__ import annotations


class EnvError(RuntimeError):
    """An environment call that failed; the message says why and what to do."""

    status = 400


class EnvNotFound(EnvError):
    status = 404


class UnknownEnvId(EnvError):
    status = 422


ERRORS: dict[str, type[EnvError]] = {cls.__name__: cls for cls in (EnvError, EnvNotFound, UnknownEnvId)}
