"""Harbor task.toml tables shared by a task and its steps: healthchecks, artifacts and verifier variables.

Field names and defaults are Harbor's (schema 1.x):
- `[environment.healthcheck]` / `[steps.healthcheck]`: `command` (required), `interval_sec` 5,
  `timeout_sec` 30, `start_period_sec` 0, `start_interval_sec` 5, `retries` 3.
- `artifacts = [...]` at the top level and in a step: absolute paths, or tables with `source` (alias `path`),
  an optional `destination` under the trial's artifacts folder and `exclude` globs.
- `[verifier.env]` / `[steps.verifier.env]`: literals, or whole-value references `${NAME}` and
  `${NAME:-default}` read from the environment rome-bench runs in.
"""

from __future__ import annotations

import os
import re
from pathlib import PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Healthcheck(BaseModel):
    """A readiness probe polled inside the sandbox with Docker HEALTHCHECK's rules (see `healthcheck.py`)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    command: str = Field(min_length=1)
    interval_sec: float = Field(default=5.0, gt=0)
    timeout_sec: float = Field(default=30.0, gt=0)
    start_period_sec: float = Field(default=0.0, ge=0)
    start_interval_sec: float = Field(default=5.0, gt=0)
    retries: int = Field(default=3, ge=1)


class Artifact(BaseModel):
    """A path copied out of the sandbox into the trial's `artifacts/` folder."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    source: str
    destination: str | None = None
    exclude: tuple[str, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _spellings(cls, value: Any) -> Any:
        if isinstance(value, str):
            return {"source": value}
        if isinstance(value, dict) and "path" in value:
            value = dict(value)
            path = value.pop("path")
            if value.setdefault("source", path) != path:
                raise ValueError(f"artifact has source {value['source']!r} and path {path!r}; keep one")
        return value

    @model_validator(mode="after")
    def _paths(self) -> Artifact:
        if not self.source.startswith("/") or "\x00" in self.source:
            raise ValueError(f"artifact source {self.source!r} must be an absolute path in the sandbox")
        dest = self.destination or None
        if dest is not None:
            parts = PurePosixPath(dest).parts
            if dest.startswith("/") or "\\" in dest or ".." in parts or dest in (".", "manifest.json"):
                raise ValueError(
                    f"artifact destination {dest!r} must be a relative path inside artifacts/ "
                    "(no leading /, no .., not manifest.json)"
                )
        object.__setattr__(self, "destination", dest)
        return self

    @property
    def target(self) -> str:
        """Where it lands under the artifacts folder: `destination`, else the source without its leading /."""
        return self.destination or self.source.lstrip("/")


_REFERENCE = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?\}$", re.DOTALL)


def resolve_env(table: Any, where: str, environ: dict[str, str] | None = None) -> dict[str, str]:
    """A `[*.env]` table with its `${NAME}` / `${NAME:-default}` values read from `environ` (os.environ)."""
    if table is None:
        return {}
    if not isinstance(table, dict):
        raise ValueError(f'{where} must be a table of NAME = "value"')
    environ = os.environ if environ is None else environ  # type: ignore[assignment]
    resolved: dict[str, str] = {}
    for name, value in table.items():
        if not isinstance(value, str | int | float | bool):
            raise ValueError(f"{where}.{name} must be a string, got {type(value).__name__}")
        text = str(value).lower() if isinstance(value, bool) else str(value)
        match = _REFERENCE.match(text)
        if match is None:
            resolved[name] = text
        elif match.group(1) in environ:
            resolved[name] = environ[match.group(1)]
        elif match.group(2) is not None:
            resolved[name] = match.group(2)
        else:
            raise ValueError(
                f"{where}.{name} = {text!r} needs ${match.group(1)} in the environment; export it or give a "
                f"default as ${{{match.group(1)}:-value}}"
            )
    return resolved


def read_artifacts(raw: Any, where: str) -> list[Artifact]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ValueError(f"{where} must be an array of paths or {{source = ...}} tables")
    return [Artifact.model_validate(entry) for entry in raw]


def read_min_reward(raw: Any, where: str) -> dict[str, float] | None:
    """`min_reward`: a number gates the `reward` metric; a table gates each metric it names."""
    if raw is None:
        return None
    if isinstance(raw, bool):
        raise ValueError(f"{where} must be a number or a table of metric = number, got a boolean")
    if isinstance(raw, int | float):
        return {"reward": float(raw)}
    if isinstance(raw, dict) and raw and all(isinstance(v, int | float) for v in raw.values()):
        return {str(k): float(v) for k, v in raw.items()}
    raise ValueError(f"{where} must be a number or a non-empty table of metric = number")
