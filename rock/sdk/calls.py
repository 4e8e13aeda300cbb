"""The admin's HTTP API as request descriptions, shared by the sync and the async SDK.

Each function returns a `Call`: what to send and how to read the answer. `Sandbox` sends it with a sync
httpx client, `AsyncSandbox` with an async one, so both speak exactly the same protocol.
"""

from __future__ import annotations

import functools
import os
import ssl
from collections.abc import AsyncIterable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import httpx
from pydantic import TypeAdapter

from rock.sdk.errors import (
    ERROR_TYPES,
    AdminUnavailable,
    CapacityExceeded,
    CommandTimeout,
    RockError,
    SandboxFailed,
    error_from_response,
)
from rock.sdk.types import (
    CreateGroupRequest,
    CreateSandboxRequest,
    ErrorBody,
    ExecRequest,
    ForwardRequest,
    GroupCreated,
    ImageInfo,
    ImageRequest,
    NetworkRequest,
    Observation,
    RunRequest,
    SandboxInfo,
    SessionRequest,
)

T = TypeVar("T")
DEFAULT_ADMIN_URL = "http://127.0.0.1:8080"
SLACK = 30.0
"""Seconds an HTTP call may take beyond its command's own timeout."""
GROUP_PATH = "/v1/sandbox-groups"
IMAGES_PATH = "/v1/images"
GROUP_SLACK_PER_MEMBER = 1.0
"""Seconds a group create may take per member beyond one create's bound (the workers start theirs at once,
Docker a few at a time)."""


def admin_url(url: str | None) -> str:
    return (url or os.environ.get("ROCK_ADMIN_URL") or DEFAULT_ADMIN_URL).rstrip("/")


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The TLS settings of every SDK client in this process (httpx's defaults), built once: building them
    loads the CA store, ~20 ms of CPU that a client per sandbox would otherwise pay each time."""
    return httpx.create_ssl_context()


def auth_headers(api_key: str | None) -> dict[str, str]:
    key = api_key or os.environ.get("ROCK_API_KEY")
    return {"Authorization": f"Bearer {key}"} if key else {}


@dataclass
class Call(Generic[T]):
    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    json: Any = None
    params: dict[str, Any] | None = None
    content: bytes | Iterable[bytes] | AsyncIterable[bytes] | None = None
    timeout: float | None = 60.0

    def request_kwargs(self) -> dict[str, Any]:
        out: dict[str, Any] = {"timeout": self.timeout}
        if self.json is not None:
            out["json"] = self.json
        if self.params is not None:
            out["params"] = self.params
        if self.content is not None:
            out["content"] = self.content
        return out

    def unsent(self, exc: httpx.TransportError, base_url: httpx.URL) -> AdminUnavailable:
        """The error for a call whose connection to the admin failed or broke before the answer."""
        return AdminUnavailable(
            f"the admin at {base_url} did not answer {self.method} {self.path} ({exc!r}); it may be "
            "restarting: retry in a few seconds (sandboxes keep running; a command cut off this way may have "
            "run, but its output is lost)"
        )

    def finish(self, response: httpx.Response) -> T:
        if not response.is_success:
            raise error_from_response(
                response.status_code,
                response.content,
                response.headers.get("Retry-After"),
                str(response.request.url),
            )
        return self.parse(response)


def _info(r: httpx.Response) -> SandboxInfo:
    return SandboxInfo.model_validate_json(r.content)


def _observation(r: httpx.Response) -> Observation:
    observation = Observation.model_validate_json(r.content)
    if observation.timed_out:
        raise CommandTimeout(
            f"the command ran past its timeout and was killed after {observation.duration:.1f} s; "
            "its session "
            "is still usable (raise timeout= for longer commands)",
            observation,
        )
    return observation


def _content(r: httpx.Response) -> bytes:
    return r.content


def _nothing(_r: httpx.Response) -> None:
    return None


_infos = TypeAdapter(list[SandboxInfo])


def create(request: CreateSandboxRequest) -> Call[SandboxInfo]:
    wait = request.queue_timeout + request.start_timeout + SLACK
    return Call(
        "POST",
        "/v1/sandboxes",
        _info,
        json=request.model_dump(),
        timeout=None if request.build_context else wait,
    )


def create_group(request: CreateGroupRequest) -> Call[GroupCreated]:
    """`request.count` sandboxes of one spec in one request (the answer lists every member)."""
    wait = request.queue_timeout + request.start_timeout + SLACK + GROUP_SLACK_PER_MEMBER * request.count
    return Call(
        "POST",
        GROUP_PATH,
        lambda r: GroupCreated.model_validate_json(r.content),
        json=request.model_dump(),
        timeout=None if request.build_context else wait,
    )


def member_error(body: ErrorBody) -> RockError:
    """The RockError an admin or worker reported for one member of a group create."""
    cls = ERROR_TYPES.get(body.type, RockError)
    if issubclass(cls, SandboxFailed):
        return cls(body.message, body.reason)
    if issubclass(cls, CapacityExceeded):
        return cls(body.message, body.retry_after or 5.0)
    return cls(body.message)


def get(sandbox_id: str) -> Call[SandboxInfo]:
    return Call("GET", f"/v1/sandboxes/{sandbox_id}", _info)


def list_all(include_deleted: bool = False) -> Call[list[SandboxInfo]]:
    return Call(
        "GET",
        "/v1/sandboxes",
        lambda r: _infos.validate_json(r.content),
        params={"all": "true"} if include_deleted else None,
    )


def delete(sandbox_id: str) -> Call[SandboxInfo]:
    return Call("DELETE", f"/v1/sandboxes/{sandbox_id}", _info)


def run(sandbox_id: str, cmd: str, session: str, timeout: float) -> Call[Observation]:
    body = RunRequest(cmd=cmd, session=session, timeout=timeout)
    return Call(
        "POST",
        f"/v1/sandboxes/{sandbox_id}/run",
        _observation,
        json=body.model_dump(),
        timeout=timeout + SLACK,
    )


def exec_(
    sandbox_id: str, cmd: str | list[str], timeout: float, cwd: str | None, env: dict[str, str] | None
) -> Call[Observation]:
    body = ExecRequest(cmd=cmd, timeout=timeout, cwd=cwd, env=env)
    return Call(
        "POST",
        f"/v1/sandboxes/{sandbox_id}/exec",
        _observation,
        json=body.model_dump(),
        timeout=timeout + SLACK,
    )


def create_session(sandbox_id: str, name: str, env: dict[str, str] | None, cwd: str | None) -> Call[None]:
    body = SessionRequest(name=name, env=env, cwd=cwd)
    return Call("POST", f"/v1/sandboxes/{sandbox_id}/sessions", _nothing, json=body.model_dump())


def close_session(sandbox_id: str, name: str) -> Call[None]:
    return Call("DELETE", f"/v1/sandboxes/{sandbox_id}/sessions/{name}", _nothing)


def read_file(sandbox_id: str, path: str) -> Call[bytes]:
    return Call("GET", f"/v1/sandboxes/{sandbox_id}/files", _content, params={"path": path})


def write_file(sandbox_id: str, path: str, data: bytes, mode: int | None) -> Call[None]:
    params: dict[str, Any] = {"path": path} if mode is None else {"path": path, "mode": mode}
    return Call("PUT", f"/v1/sandboxes/{sandbox_id}/files", _nothing, params=params, content=data)


def upload(sandbox_id: str, tar: bytes | Iterable[bytes] | AsyncIterable[bytes], dest: str) -> Call[None]:
    """Unpack `tar` (bytes, or pieces of them sent as they come) under `dest` inside the sandbox."""
    return Call(
        "POST",
        f"/v1/sandboxes/{sandbox_id}/upload",
        _nothing,
        params={"dest": dest},
        content=tar,
        timeout=600.0,
    )


def download(sandbox_id: str, path: str) -> Call[bytes]:
    return Call("GET", f"/v1/sandboxes/{sandbox_id}/download", _content, params={"path": path}, timeout=600.0)


def set_network(sandbox_id: str, network: str) -> Call[str]:
    body = NetworkRequest(network=network)  # type: ignore[arg-type]
    path = f"/v1/sandboxes/{sandbox_id}/network"
    return Call("PUT", path, lambda r: str(r.json()["network"]), json=body.model_dump())


def forward(sandbox_id: str, port: int, target_socket: str) -> Call[int]:
    body = ForwardRequest(port=port, target_socket=target_socket)
    return Call(
        "POST", f"/v1/sandboxes/{sandbox_id}/forward", lambda r: int(r.json()["port"]), json=body.model_dump()
    )


def ensure_image(request: ImageRequest) -> Call[ImageInfo]:
    """Build or resolve an image on the fleet (a build the worker cuts off at its deadline, so no bound
    here, as for a create with a build_context)."""
    return Call(
        "POST",
        IMAGES_PATH,
        lambda r: ImageInfo.model_validate_json(r.content),
        json=request.model_dump(),
        timeout=None,
    )
