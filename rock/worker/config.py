"""A worker's settings (`rock worker serve`, or the local worker inside `rock admin serve`)."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from rock.sdk.types import parse_memory


def default_state_dir() -> Path:
    return Path(os.environ.get("ROCK_HOME", Path.home() / ".rock"))


def _total_memory() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


class WorkerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(
        "",
        description="Stable name: a restarted worker with the same id adopts the containers it labelled "
        "before. Empty: the host name plus a hash of STATE_DIR (and -2, -3, ... for more workers on that "
        "folder; see rock.worker.identity), so two workers or fleets on one host never share an id.",
    )
    admin_url: str = Field("http://127.0.0.1:8080", description="The admin this worker heartbeats to.")
    host: str = Field("127.0.0.1", description="Address the worker's API binds.")
    port: int = Field(0, description="Port of the worker's API; 0 picks a free port.")
    advertise_url: str | None = Field(
        None, description="The URL the admin calls this worker on; null: http://HOST:PORT."
    )
    token: SecretStr | None = Field(
        None,
        description="The fleet's worker credential (the admin's STATE_DIR/worker.token): sent with every "
        "heartbeat and required of every caller, on any bind address. Never a user's API key.",
    )
    cpus: float = Field(
        default_factory=lambda: float((os.cpu_count() or 1) * 8),
        gt=0,
        description="CPUs to hand out. Sandbox CPU limits are caps, not reservations, so the default "
        "overcommits 8x the host's CPUs.",
    )
    memory: str = Field(
        default_factory=lambda: f"{_total_memory() * 2 // 1024**2}m",
        description="Memory to hand out, a size such as 16g (caps too: the default overcommits 2x the host's "
        "RAM).",
    )
    slots: int = Field(64, gt=0, description="Sandboxes this worker holds at most.")
    state_dir: Path = Field(
        default_factory=default_state_dir,
        description="State folder; per-sandbox socket folders live under STATE_DIR/run (keep it short: unix "
        "socket paths are at most 107 bytes).",
    )
    heartbeat_interval: float = Field(2.0, gt=0, description="Seconds between heartbeats to the admin.")
    pypi_cache: str | None = Field(
        None,
        description="host:port of the fleet's PyPI cache (devpi-server) for `packages` sandboxes; null: no "
        "such policy.",
    )
    apt_cache: str | None = Field(
        None, description="host:port of the fleet's apt cache (apt-cacher) for `packages` sandboxes."
    )

    @field_validator("memory")
    @classmethod
    def _memory_is_a_size(cls, value: str) -> str:
        parse_memory(value)
        return value

    @property
    def run_dir(self) -> Path:
        return self.state_dir / "run" / self.id

    def url(self, port: int) -> str:
        return self.advertise_url or f"http://{self.host}:{port}"
