"""Wire types of ROCK's user API, shared by the admin and the SDK (JSON over HTTP). The admin↔worker hop
has its own module, `rock.worker.contract`."""

from __future__ import annotations

import ipaddress
import re
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rock.observation import Observation
from rock.sdk.checks import (
    MAX_CPUS,
    MAX_LIFETIME,
    MAX_PATH,
    MAX_QUEUE_TIMEOUT,
    MAX_START_TIMEOUT,
    MAX_UID,
    MIN_CPUS,
    CommandSeconds,
    Env,
    Name,
    SandboxPath,
    Text,
    image_reference,
    parse_memory,
    sandbox_disk,
    sandbox_memory,
)

__all__ = [
    "CreateGroupRequest",
    "CreateSandboxRequest",
    "ErrorBody",
    "ExecRequest",
    "FailureReason",
    "ForwardRequest",
    "GroupCreated",
    "GroupMember",
    "ImageInfo",
    "ImageRequest",
    "NetworkRequest",
    "Observation",
    "RunRequest",
    "SandboxInfo",
    "SandboxSpec",
    "SandboxState",
    "SessionRequest",
    "WorkerCapacity",
    "WorkerInfo",
    "parse_memory",
]

_USER = re.compile(r"^(\d{1,10})(?::(\d{1,10}))?$")


class SandboxState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    STOPPED = "stopped"
    DELETED = "deleted"
    FAILED = "failed"


class FailureReason(StrEnum):
    IMAGE_ERROR = "image_error"
    """The image is unknown here or its build failed (the detail holds the tail of the build log)."""
    OOM_KILLED = "oom_killed"
    START_TIMEOUT = "start_timeout"
    START_ERROR = "start_error"
    WORKER_LOST = "worker_lost"
    EXITED = "exited"
    """The container stopped on its own (its main process exited)."""
    DISK_QUOTA = "disk_quota"
    """The sandbox wrote more than its `disk` limit; the worker stopped it."""
    SOCKET_TAMPERED = "socket_tampered"
    """The sandbox removed or replaced its rocklet's socket (with a symlink, say): the worker no longer talks
    to it."""


class SandboxSpec(BaseModel):
    """What a sandbox should be. Sizes are checked against the admin's limits on create."""

    model_config = ConfigDict(extra="forbid")

    image: str = Field("python:3.11", max_length=MAX_PATH)
    """Image reference (`name[:tag][@digest]`); public names resolve through the alias table
    (`rock image ls`)."""
    build_context: SandboxPath | None = None
    """A folder with a Dockerfile on the worker's host: built through the alias table, then used as image."""
    cpus: float = Field(1.0, ge=MIN_CPUS, le=MAX_CPUS, allow_inf_nan=False)
    """CPU cap, from 0.01 (Docker's smallest quota)."""
    memory: str = Field("512m", max_length=64)
    """Memory cap, from 6m (Docker's smallest limit)."""
    disk: str = Field("10g", max_length=64)
    """What the sandbox may write to its own filesystem. A hard limit where the worker's Docker supports
    overlay2 `size=` (xfs with pquota); elsewhere the worker measures and stops a sandbox over it within
    seconds (reason `disk_quota`). The socket folder shared with the host is a small tmpfs of its own."""
    pids: int = Field(256, ge=16, le=4_194_304)
    ttl: float = Field(3600.0, gt=0, le=MAX_LIFETIME, allow_inf_nan=False)
    """Seconds after start when the admin stops the sandbox."""
    idle_timeout: float = Field(600.0, gt=0, le=MAX_LIFETIME, allow_inf_nan=False)
    """Seconds without any request after which the admin stops the sandbox."""
    network: Literal["none", "packages", "bridge"] = "none"
    """`none` (default): no network at all. `packages`: no network either, but pip, uv and apt reach the
    fleet's package cache through the rocklet's forwarder (needs `rock admin serve --package-cache`).
    `bridge`: egress through Docker's bridge, opt-in (the full network)."""
    egress: list[str] = Field(default_factory=list, max_length=256)
    """With `bridge`: the only IPv4 networks (CIDR, e.g. `10.1.2.0/24`) the sandbox may connect to. Empty:
    any. Enforced by firewall rules in the sandbox's own network namespace (the worker needs root)."""

    @field_validator("egress")
    @classmethod
    def _egress_is_cidrs(cls, value: list[str]) -> list[str]:
        for cidr in value:
            try:
                ipaddress.IPv4Network(cidr)
            except ValueError as exc:
                raise ValueError(
                    f"egress entry {cidr!r} is not an IPv4 network like 10.1.2.0/24 ({exc})"
                ) from None
        return value

    @model_validator(mode="after")
    def _egress_needs_bridge(self) -> SandboxSpec:
        if self.egress and self.network != "bridge":
            raise ValueError("egress lists the networks a bridge sandbox may reach: set network='bridge' too")
        return self

    user: str = Field("1000:1000", max_length=32)
    """`uid:gid` the sandbox's processes run as (a lone `uid` means `uid:uid`; `root` means `0:0`). The
    default is an unprivileged user with no capabilities. Root (for terminal tasks written for a root shell)
    gets back only the capabilities such a shell needs; see `rock.worker.containers.ROOT_CAPABILITIES`."""
    env: Env = Field(default_factory=dict)
    start_timeout: float = Field(60.0, gt=0, le=MAX_START_TIMEOUT, allow_inf_nan=False)
    """Seconds the rocklet may take to answer after the container starts."""

    @field_validator("memory")
    @classmethod
    def _memory_is_a_limit(cls, value: str) -> str:
        return sandbox_memory(value)

    @field_validator("disk")
    @classmethod
    def _disk_is_a_limit(cls, value: str) -> str:
        return sandbox_disk(value)

    @field_validator("image")
    @classmethod
    def _image_is_a_reference(cls, value: str) -> str:
        return image_reference(value)

    @field_validator("user")
    @classmethod
    def _user_is_numeric(cls, value: str) -> str:
        match = _USER.match("0" if value.strip() == "root" else value.strip())
        if not match:
            raise ValueError(
                f"user {value!r} is not 'uid:gid', 'uid' or 'root'; give numbers, e.g. '1000:1000' or '0:0' "
                "(names other than root mean nothing in an arbitrary image)"
            )
        uid, gid = int(match.group(1)), int(match.group(2) or match.group(1))
        if max(uid, gid) > MAX_UID:
            raise ValueError(f"user {value!r}: uid and gid go up to {MAX_UID}")
        return f"{uid}:{gid}"

    @property
    def memory_bytes(self) -> int:
        return parse_memory(self.memory)

    @property
    def disk_bytes(self) -> int:
        return parse_memory(self.disk)

    @property
    def is_root(self) -> bool:
        return self.user.partition(":")[0] == "0"


class CreateSandboxRequest(SandboxSpec):
    queue_timeout: float = Field(30.0, ge=0, le=MAX_QUEUE_TIMEOUT, allow_inf_nan=False)
    """Seconds a create may wait in the admission queue for room before it fails with 429 (at most 600). A
    create whose client disconnects leaves the queue at once."""


MAX_GROUP = 1024
"""Sandboxes one group create may ask for."""


class CreateGroupRequest(CreateSandboxRequest):
    """`count` sandboxes of one spec in one request (a training step's group, a task's attempts)."""

    count: int = Field(ge=1, le=MAX_GROUP)


_REPOSITORY = r"^[a-z0-9]+(?:[._-]+[a-z0-9]+)*(?:/[a-z0-9]+(?:[._-]+[a-z0-9]+)*)*$"


class ImageRequest(BaseModel):
    """POST /v1/images: an image made ready on the fleet, built from a folder with a Dockerfile on the
    workers' hosts (`build_context`, one of the operator's build roots) or resolved by name (`image`, through
    the alias table). A build runs under a sandbox's limits: `cpus` and `memory` for each RUN step, the
    network `network` names, and a deadline."""

    model_config = ConfigDict(extra="forbid")

    build_context: SandboxPath | None = None
    dockerfile: str = Field("Dockerfile", min_length=1, max_length=255, pattern=r"^[^/\x00]+$")
    """The Dockerfile's name in `build_context`."""
    image: str | None = Field(None, max_length=MAX_PATH)
    repository: str | None = Field(None, max_length=200, pattern=_REPOSITORY)
    """The built image's name; its tag is always the hash of what it was built from, so two contexts never
    share a tag and no build can take the name of an image it was not built from. None:
    `ale/build-<folder>`."""
    network: Literal["none", "packages", "bridge"] = "none"
    """The build's RUN steps: `none` (default), `packages` (pip, uv and apt reach the fleet's package cache;
    needs `rock admin serve --package-cache`), `bridge` (the full network, opt-in)."""
    cpus: float = Field(1.0, ge=MIN_CPUS, le=MAX_CPUS, allow_inf_nan=False)
    memory: str = Field("2g", max_length=64)

    @field_validator("memory")
    @classmethod
    def _memory_is_a_limit(cls, value: str) -> str:
        return sandbox_memory(value)

    @field_validator("image")
    @classmethod
    def _image_is_a_reference(cls, value: str | None) -> str | None:
        return None if value is None else image_reference(value)

    @model_validator(mode="after")
    def _one_source(self) -> ImageRequest:
        if (self.build_context is None) == (self.image is None):
            raise ValueError(
                "give exactly one of build_context (a folder to build) and image (a name to resolve)"
            )
        return self

    @property
    def memory_bytes(self) -> int:
        return parse_memory(self.memory)


class ImageInfo(BaseModel):
    """The answer to an `ImageRequest`: the image sandboxes are created from, and what to know of it."""

    tag: str
    """`repository:tag` on the worker that made it (the admin copies it to others as sandboxes need it)."""
    workdir: str
    """The image's WORKDIR (`/` when it sets none): ROCK starts commands in $HOME, `docker run` here."""
    notes: list[str] = Field(default_factory=list)
    """One line per base image whose local stand-in differs from it (another Python, Debian for Ubuntu)."""
    worker: str | None = None
    """The worker that built or resolved it."""


class SandboxInfo(BaseModel):
    id: str
    state: SandboxState
    spec: SandboxSpec
    owner: str
    worker_id: str | None = None
    host_dir: str | None = None
    """The sandbox's socket folder on its worker's host (mounted at /run/rock inside)."""
    failure_reason: FailureReason | None = None
    detail: str | None = None
    created_at: datetime
    started_at: datetime | None = None
    stopped_at: datetime | None = None
    expires_at: datetime | None = None


class RunRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cmd: Text
    session: Name = "default"
    timeout: CommandSeconds = 60.0
    """Seconds, up to one day."""


class ExecRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cmd: Text | Annotated[list[Text], Field(min_length=1)]
    timeout: CommandSeconds = 60.0
    """Seconds, up to one day."""
    cwd: SandboxPath | None = None
    env: Env | None = None


class SessionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Name
    env: Env | None = None
    cwd: SandboxPath | None = None


class ForwardRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    port: int = Field(ge=0, le=65535)
    """TCP port on 127.0.0.1 inside the sandbox; 0 picks a free one."""
    target_socket: SandboxPath = "/run/rock/model.sock"


class NetworkRequest(BaseModel):
    """A running sandbox's network for the next phase: `none`, or back to the one it was made with."""

    model_config = ConfigDict(extra="forbid")

    network: Literal["none", "packages", "bridge"]


class ErrorBody(BaseModel):
    """Every error response's JSON: the SDK raises the exception class named by `type` again."""

    type: str
    message: str
    reason: FailureReason | None = None
    retry_after: float | None = None
    """Seconds to wait before asking again, for a group member refused for room (a whole request's refusal
    says it in the Retry-After header instead)."""


class GroupMember(BaseModel):
    """One sandbox of a group create: running (`sandbox`), or why it is not (`error`)."""

    id: str
    """The member's sandbox id; one refused before placement (quota, no room in time) was never created."""
    sandbox: SandboxInfo | None = None
    error: ErrorBody | None = None


class GroupCreated(BaseModel):
    """The answer to a group create: every member, each admitted, placed and started (or failed) alone."""

    requested: int
    running: int
    members: list[GroupMember]
    summary: str
    """The outcome in one plain line, e.g. `6 of 8 sandboxes running; 2 failed: ...`."""


class WorkerCapacity(BaseModel):
    cpus: float = Field(ge=0)
    memory: int = Field(ge=0)
    """Bytes."""
    slots: int = Field(ge=0)


class WorkerInfo(BaseModel):
    id: str
    url: str
    capacity: WorkerCapacity
    used: WorkerCapacity | None = None
    sandboxes: int
    last_heartbeat: datetime
    images: int | None = None
    """How many images its Docker holds, as its last heartbeat listed them (None: not listed yet)."""
