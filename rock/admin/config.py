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

    name: str = Field(description="Who holds the key (shown in logs and metrics, never the key itself).")
    key: str = Field(min_length=16, repr=False, description="The API key, 16 characters or more.")
    max_sandboxes: int | None = Field(
        None, ge=0, description="Sandboxes it may hold at once; null: no limit."
    )
    max_cpus: float | None = Field(
        None, ge=0, description="CPUs its sandboxes may ask for in all; null: no limit."
    )
    max_memory: str | None = Field(
        None, description="Memory its sandboxes may ask for in all, e.g. 64g; null: no limit."
    )

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

    build_contexts: list[Path] = Field(
        default_factory=list,
        description="Folders (on the workers' hosts) a create's `build_context` may name, or name a folder "
        "inside; empty: no create may build. Only folders the operator controls: one a tenant can write (a "
        "sandbox's socket folder, say) would let it run any build it likes.",
    )
    max_cpus: float = Field(8.0, description="Most CPUs one sandbox may ask for.")
    max_memory: str = Field("16g", description="Most memory one sandbox may ask for (a size: 512m, 16g).")
    max_disk: str = Field("100g", description="Most disk one sandbox may ask for (a size: 10g).")
    max_pids: int = Field(4096, description="Most processes one sandbox may ask for.")
    max_ttl: float = Field(7 * 24 * 3600.0, description="Longest lifetime one sandbox may ask for, seconds.")
    max_idle_timeout: float = Field(24 * 3600.0, description="Longest idle timeout one may ask for, seconds.")
    max_start_timeout: float = Field(600.0, description="Longest start timeout one may ask for, seconds.")

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

    host: str = Field("127.0.0.1", description="Address to bind; anything but 127.0.0.1 needs an API key.")
    port: int = Field(8080, description="Port of the admin API.")
    control_port: int = Field(
        0,
        ge=0,
        le=65535,
        description="The control listener's port (worker heartbeats and /health, rock.admin.control); 0 "
        "picks a free one, which workers learn from their heartbeat replies.",
    )
    state_dir: Path = Field(
        default_factory=default_state_dir, description="State folder (default $ROCK_HOME or ~/.rock)."
    )
    database_url: str | None = Field(
        None,
        description="SQLAlchemy URL of the store; null: sqlite:///STATE_DIR/admin.db. PostgreSQL: "
        "postgresql+psycopg://USER:PASSWORD@HOST/DB.",
    )
    api_keys: list[KeyPolicy] = Field(
        default_factory=list,
        description="API keys and their quotas. Required when binding a non-loopback address; when any is "
        "set, every request needs one.",
    )
    worker_token: SecretStr | None = Field(
        None,
        min_length=16,
        description="The credential workers heartbeat with and the admin calls them with (16+ characters); "
        "never an API key. Null: one is made once and kept in STATE_DIR/worker.token (owner-only), where "
        "workers on this host read it.",
    )
    limits: SpecLimits = Field(
        default_factory=SpecLimits, description="The largest sandbox one create may ask for."
    )
    warm: dict[str, int] = Field(
        default_factory=dict,
        description="Warm pools: image -> how many started sandboxes of it (default spec) the admin keeps "
        "ready (rock.admin.warm); a create of exactly that spec takes one instead of starting a container.",
    )
    max_waiting: int = Field(
        256, ge=0, description="Creates that may wait for room at once; one more is refused with 429 at once."
    )
    heartbeat_timeout: float = Field(
        15.0, gt=0, description="Seconds before a silent worker is lost, and so are its sandboxes."
    )
    startup_grace: float = Field(
        60.0,
        gt=0,
        description="Seconds after the admin starts that a worker it has not heard from yet may take to come "
        "back (a worker rebuilding its runtime needs a while) before that worker's sandboxes are lost.",
    )
    reap_interval: float = Field(
        1.0,
        gt=0,
        description="Seconds between reaper passes (flush activity times, drop silent workers, stop expired "
        "and idle sandboxes).",
    )
    local_worker: WorkerConfig | None = Field(
        None,
        description="The worker `rock admin serve` runs in its own process (null: `--no-local-worker`).",
    )

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
