"""The admin↔worker wire contract: every request and reply model of that hop, imported by both ends.

Calls on a sandbox the admin forwards unchanged from its users (run, exec, sessions, forward) reuse the SDK's
request models; their replies are the rocklet's (`rock.rocklet.types`), passed through. An image request is
the SDK's too (`ImageRequest`, answered with `ImageInfo`). Everything else the two speak (creating a
container, listing them, heartbeats) is defined here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict

from rock.sdk.types import (
    ErrorBody,
    ExecRequest,
    ForwardRequest,
    ImageInfo,
    ImageRequest,
    RunRequest,
    SandboxSpec,
    SessionRequest,
    WorkerCapacity,
)

__all__ = [
    "GROUP_PATH",
    "HEALTH_PATH",
    "HEARTBEAT_PATH",
    "IMAGES_PATH",
    "IMAGE_ENSURE_PATH",
    "CreateOnWorker",
    "CreateShare",
    "CreatedOnWorker",
    "CreatedShare",
    "ExecRequest",
    "ForwardRequest",
    "Heartbeat",
    "HeartbeatReply",
    "ImageInfo",
    "ImageRequest",
    "RunRequest",
    "SessionAck",
    "SessionRequest",
    "ShareMember",
    "WorkerCapacity",
    "WorkerSandbox",
    "heartbeat_url",
    "sandbox_path",
    "share_member",
]

HEARTBEAT_PATH = "/v1/workers/heartbeat"
"""On the admin: where workers post `Heartbeat` (with the worker credential) and get `HeartbeatReply`."""
IMAGES_PATH = "/v1/images"
"""On a worker: GET IMAGES_PATH/archive?name=TAG streams the image's `docker save` archive; POST IMAGES_PATH
with such an archive as body loads it (`docker load`), answering the tags loaded."""
IMAGE_ENSURE_PATH = IMAGES_PATH + "/ensure"
"""On a worker: POST an `ImageRequest` (the admin's user request, passed on once it checked the build folder
is one of the operator's) to build or resolve it there; answers its `ImageInfo`."""
GROUP_PATH = "/v1/sandbox-groups"
"""On a worker: POST `CreateShare` starts a group create's share of this worker at once (`CreatedShare`). On
the admin: POST `CreateGroupRequest` (the user API)."""
HEALTH_PATH = "/health"
"""On a worker: answers 200 while it runs. The admin asks a worker whose heartbeats are late before it
declares it lost."""


def heartbeat_url(admin_url: str, port: int | None) -> str:
    """Where a worker posts its next heartbeat: the admin's control listener on `port` (from the last reply),
    on the host of `admin_url`; the admin's own URL when the reply named none."""
    if port is None:
        return admin_url.rstrip("/") + HEARTBEAT_PATH
    parts = urlsplit(admin_url)
    host = f"[{parts.hostname}]" if parts.hostname and ":" in parts.hostname else parts.hostname
    return urlunsplit((parts.scheme, f"{host}:{port}", HEARTBEAT_PATH, "", ""))


def sandbox_path(sandbox_id: str | None = None, op: str | None = None) -> str:
    """On a worker: /v1/sandboxes, /v1/sandboxes/ID, or /v1/sandboxes/ID/OP."""
    path = "/v1/sandboxes" if sandbox_id is None else f"/v1/sandboxes/{sandbox_id}"
    return path if op is None else f"{path}/{op}"


class CreateOnWorker(BaseModel):
    """POST /v1/sandboxes on a worker: start the container of a sandbox the admin has placed there."""

    model_config = ConfigDict(extra="forbid")

    id: str
    spec: SandboxSpec
    owner: str
    label_ttl: float | None = None
    """Seconds the container's lifetime label gives it (rock.worker.lifetime) when more than `spec.ttl`: a
    warm pool's sandbox waits in the pool before its TTL starts."""


class CreatedOnWorker(BaseModel):
    """The reply to `CreateOnWorker` once the sandbox's rocklet answers."""

    host_dir: str
    """The sandbox's folder on the worker's host (its rocklet socket lives there)."""


class CreateShare(BaseModel):
    """POST GROUP_PATH on a worker: start every sandbox of a group create placed on it, in one call."""

    model_config = ConfigDict(extra="forbid")

    sandboxes: list[CreateOnWorker]


class ShareMember(BaseModel):
    """One sandbox of a share: started (`host_dir`), or why not (`error`); the others are not affected."""

    id: str
    host_dir: str | None = None
    error: ErrorBody | None = None


def share_member(sandbox_id: str, outcome: CreatedOnWorker | BaseException) -> ShareMember:
    """A worker's report on one member of a share from how its create ended."""
    from rock.sdk.errors import RockError

    if isinstance(outcome, CreatedOnWorker):
        return ShareMember(id=sandbox_id, host_dir=outcome.host_dir)
    if isinstance(outcome, RockError):
        error = ErrorBody(
            type=type(outcome).__name__, message=outcome.message, reason=getattr(outcome, "reason", None)
        )
    else:
        error = ErrorBody(
            type="SandboxFailed", message=f"the worker failed to start it: {outcome!r}", reason="start_error"
        )
    return ShareMember(id=sandbox_id, error=error)


class CreatedShare(BaseModel):
    """The reply to `CreateShare`, one member per sandbox asked for, once each started or failed."""

    members: list[ShareMember]


class SessionAck(BaseModel):
    """The reply to opening or closing a shell session."""

    name: str


class WorkerSandbox(BaseModel):
    """One container as its worker sees it."""

    id: str
    status: Literal["running", "exited", "oom_killed", "disk_quota", "socket_tampered"]
    detail: str | None = None


class Heartbeat(BaseModel):
    worker_id: str
    listed_at: datetime
    """When the worker listed its containers: sandboxes started after it may be missing from the list."""
    url: str
    capacity: WorkerCapacity
    sandboxes: list[WorkerSandbox] | None = None
    """None when listing the containers took too long this time: the admin reconciles at a later beat."""
    images: list[str] | None = None
    """The `repository:tag` of every image its Docker holds (None: not listed this time), so placement can
    prefer workers that have a sandbox's image, and the admin can bring it to one that has not."""
    strays: list[str] = []
    """Sandboxes of this fleet whose containers run on this worker's Docker host under another worker's id
    (one lost for good, say): the admin has the ones it no longer wants removed."""


class HeartbeatReply(BaseModel):
    remove: list[str]
    """Sandboxes the admin no longer wants: the worker removes their containers (strays included)."""
    heartbeat_port: int | None = None
    """The admin's control listener (rock.admin.control): the worker sends its next beats to this port on the
    admin's host, where they never queue behind creates (back to the admin's URL if that fails)."""
