"""The admin's settings (`rock admin serve`): bind address, store URL, API keys and quotas, spec limits."""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from rock.sdk.errors import BadRequest
from rock.sdk.types import SandboxSpec, parse_memory
from rock.worker.config import WorkerConfig, default_state_dir


class KeyPolicy(BaseModel):
    """An API key and its quota (None: unlimited). Quotas count live and queued sandboxes."""

    model_config = ConfigDict(extra="forbid")

    name: str
    key: str = Field(min_length=16, repr=False)
    max_sandboxes: int | None = Field(None, ge=0)
    max_cpus: float | None = Field(None, ge=0)
    max_memory: str | None = None

    @field_validator("max_memory")
    @classmethod
    def _memory_is_a_size(cls, value: str | None) -> str | None:
        if value is not None:
            parse_memory(value)
        return value


class SpecLimits(BaseModel):
    """The largest sandbox one create may ask for, and what it may be built from; a create over a limit
    fails with 422 naming it."""

    model_config = ConfigDict(extra="forbid")

    build_contexts: list[Path] = Field(default_factory=list)
    """Folders (on the workers' hosts) a create's `build_context` may name, or name a folder inside; empty:
    no create may build. Only folders the operator controls: one a tenant can write (a sandbox's socket
    folder, say) would let it run any build it likes."""

    max_cpus: float = 8.0
    max_memory: str = "16g"
    max_disk: str = "100g"
    max_pids: int = 4096
    max_ttl: float = 7 * 24 * 3600.0
    max_idle_timeout: float = 24 * 3600.0
    max_start_timeout: float = 600.0

    def check(self, spec: SandboxSpec) -> None:
        """Raise BadRequest (422) naming the first limit `spec` goes over, or a build_context outside
        `build_contexts`."""
        if spec.build_context is not None:
            self.check_build_context(spec.build_context)
        checks = [
            ("cpus", spec.cpus, self.max_cpus),
            ("memory", spec.memory_bytes, parse_memory(self.max_memory)),
            ("disk", spec.disk_bytes, parse_memory(self.max_disk)),
            ("pids", spec.pids, self.max_pids),
            ("ttl", spec.ttl, self.max_ttl),
            ("idle_timeout", spec.idle_timeout, self.max_idle_timeout),
            ("start_timeout", spec.start_timeout, self.max_start_timeout),
        ]
        for name, value, limit in checks:
            if value > limit:
                raise BadRequest(
                    f"{name}={getattr(spec, name)} is over this admin's limit "
                    f"max_{name}={getattr(self, 'max_' + name)}; ask for less"
                )

    def check_build_context(self, requested: str) -> None:
        """BadRequest unless `requested` is one of `build_contexts` or inside one (symlinks resolved on this
        host). Every refused path gets the same answer: whether it exists is never told."""
        resolved = os.path.realpath(requested) if os.path.isabs(requested) else None
        for root in self.build_contexts:
            allowed = os.path.realpath(root)
            if resolved is not None and (
                resolved == allowed or resolved.startswith(allowed.rstrip("/") + "/")
            ):
                return
        raise BadRequest(
            f"build_context {requested!r} is not a folder this admin builds sandboxes from; use an `image` "
            "(`rock image ls`), or ask the operator to add the folder (rock admin serve --build-context-root)"
        )

    def allow_build_context(self, folder: Path) -> None:
        """Add a folder this admin itself builds from (the GEM image's) to `build_contexts`."""
        if folder not in self.build_contexts:
            self.build_contexts.append(folder)


class AdminConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    host: str = "127.0.0.1"
    port: int = 8080
    control_port: int = Field(0, ge=0, le=65535)
    """The control listener's port (worker heartbeats and /health, rock.admin.control); 0 picks a free one,
    which workers learn from their heartbeat replies."""
    state_dir: Path = Field(default_factory=default_state_dir)
    database_url: str | None = None
    """SQLAlchemy URL; default sqlite:///STATE_DIR/admin.db. PostgreSQL: postgresql+psycopg://..."""
    api_keys: list[KeyPolicy] = Field(default_factory=list)
    """Required when binding a non-loopback address; when any is set, every request needs one."""
    worker_token: SecretStr | None = Field(None, min_length=16)
    """The credential workers heartbeat with and the admin calls them with; never an API key. None: one is
    made once and kept in STATE_DIR/worker.token (owner-only), where workers on this host read it."""
    limits: SpecLimits = Field(default_factory=SpecLimits)
    warm: dict[str, int] = Field(default_factory=dict)
    """Warm pools: image -> how many started sandboxes of it (default spec) the admin keeps ready
    (rock.admin.warm); a create of exactly that spec takes one instead of starting a container."""
    max_waiting: int = Field(256, ge=0)
    """Creates that may wait for room at once; one more is refused with 429 at once."""
    heartbeat_timeout: float = Field(15.0, gt=0)
    """A worker silent this long is lost, and so are its sandboxes."""
    startup_grace: float = Field(60.0, gt=0)
    """After the admin starts, how long a worker it has not heard from yet may take to come back (a worker
    rebuilding its runtime needs a while) before that worker's sandboxes are lost."""
    reap_interval: float = Field(1.0, gt=0)
    local_worker: WorkerConfig | None = None
    """The worker `rock admin serve` runs in its own process (None: `--no-local-worker`)."""

    @model_validator(mode="after")
    def _build_roots_are_not_sandbox_folders(self) -> AdminConfig:
        if self.local_worker is not None:
            sockets = os.path.realpath(self.local_worker.state_dir / "run")
            for root in self.limits.build_contexts:
                allowed = os.path.realpath(root)
                if os.path.commonpath([allowed, sockets]) in (allowed, sockets):
                    raise ValueError(
                        f"build context root {root} overlaps the sandboxes' socket folders ({sockets}), "
                        "which tenants write; name a folder of the operator's own"
                    )
        return self

    @property
    def worker_token_path(self) -> Path:
        return self.state_dir / "worker.token"

    @property
    def store_url(self) -> str:
        return self.database_url or f"sqlite:///{self.state_dir / 'admin.db'}"


def load_keys(path: Path) -> list[KeyPolicy]:
    """A YAML list of `{name, key, max_sandboxes, max_cpus, max_memory}`."""
    data = yaml.safe_load(path.read_text()) or []
    if not isinstance(data, list):
        raise ValueError(f"{path} must hold a YAML list of keys ({{name, key, max_sandboxes, ...}})")
    return [KeyPolicy.model_validate(item) for item in data]
