"""Settings: JSON files layered, then `IFLOW_<key>` environment variables.

Precedence, lowest first: defaults, the user file (`$IFLOW_HOME/settings.json`, `~/.iflow/settings.json` by
default), the project file (the nearest `.iflow/settings.json` from the working directory up to the project
root), the system file (`$IFLOW_SYSTEM_SETTINGS`, default `/etc/iflow/settings.json`: what an administrator
sets for everyone), then environment variables, so one run can be changed without editing a file.

Objects merge key by key (`context`), hook lists add up across files, anything else is replaced. Each
top-level key can be set from the environment as `IFLOW_<key>` (`IFLOW_apiKey`) or `IFLOW_<KEY_IN_SNAKE_CASE>`
(`IFLOW_API_KEY`); object values are given as JSON.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from iflow.hooks import HookCommand, HookMatcher, HooksConfig
from iflow.types import ContextConfig, PromptProfile

ApprovalMode = Literal["default", "auto-edit", "yolo", "plan"]
DEFAULT_SYSTEM_SETTINGS = Path("/etc/iflow/settings.json")


class SettingsError(ValueError):
    """A settings file or variable that cannot be used; the message names it and says what to fix."""


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    base_url: str | None = Field(None, alias="baseUrl", description="OpenAI-compatible endpoint, up to /v1")
    api_key: str | None = Field(None, alias="apiKey", repr=False, description="bearer token for the endpoint")
    model_name: str | None = Field(None, alias="modelName", description="model to request")
    approval_mode: ApprovalMode = Field(
        "default",
        alias="approvalMode",
        description="default asks before shell and writes; auto-edit allows writes; yolo allows all; "
        "plan is read-only",
    )
    prompt_profile: PromptProfile = Field(
        "full",
        alias="promptProfile",
        description="full: every tool and the full instructions; compact: shell, read_file, write_file and "
        "replace with one-line descriptions and a short system prompt (for small models); shell: compact "
        "with the shell as the only tool",
    )
    hooks: HooksConfig = Field(default_factory=dict, description="commands run on agent events (iflow.hooks)")
    context: ContextConfig = Field(
        default_factory=ContextConfig, description="context-engineering thresholds"
    )


def iflow_home(env: Mapping[str, str] | None = None) -> Path:
    """The global iFlow folder: `$IFLOW_HOME`, or `~/.iflow`."""
    env = os.environ if env is None else env
    return Path(env["IFLOW_HOME"]).expanduser() if env.get("IFLOW_HOME") else Path.home() / ".iflow"


def project_root(cwd: Path) -> Path:
    """The nearest folder from `cwd` upwards that holds `.git`, or `cwd` itself when there is none."""
    cwd = cwd.resolve()
    for folder in (cwd, *cwd.parents):
        if (folder / ".git").exists():
            return folder
    return cwd


def settings_files(cwd: Path, env: Mapping[str, str] | None = None) -> list[Path]:
    """The settings files that apply in `cwd`, lowest precedence first (existing ones only)."""
    env = os.environ if env is None else env
    user = iflow_home(env) / "settings.json"
    files = [user]
    root = project_root(cwd)
    for folder in (cwd.resolve(), *cwd.resolve().parents):
        candidate = folder / ".iflow" / "settings.json"
        if candidate.is_file() and candidate.resolve() != user.resolve():
            files.append(candidate)
            break
        if folder == root:
            break
    files.append(Path(env.get("IFLOW_SYSTEM_SETTINGS") or DEFAULT_SYSTEM_SETTINGS))
    return [f for f in files if f.is_file()]


def _merge(base: dict[str, Any], layer: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in layer.items():
        if key == "hooks" and isinstance(value, dict) and isinstance(merged.get(key), dict):
            hooks = {event: list(groups) for event, groups in merged[key].items()}
            for event, groups in value.items():
                hooks[event] = hooks.get(event, []) + list(groups)
            merged[key] = hooks
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _checked(data: Any, source: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise SettingsError(f"{source} must hold a JSON object of settings, not {type(data).__name__}")
    try:
        Settings.model_validate(data)
    except ValidationError as error:
        raise SettingsError(f"{source} has invalid settings: {_explain(error)}") from error
    return data


def _explain(error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        where = ".".join(str(p) for p in item["loc"])
        if item["type"] == "extra_forbidden":
            model, level = _model_at(item["loc"])
            allowed = ", ".join(sorted(f.alias or name for name, f in model.model_fields.items()))
            parts.append(f"unknown key {where!r} ({level} keys: {allowed})")
        else:
            parts.append(f"{where}: {item['msg']}")
    return "; ".join(parts)


def _model_at(loc: tuple[int | str, ...]) -> tuple[type[BaseModel], str]:
    """The settings model an unknown key at `loc` sits in, and how to name that level."""
    if loc[0] == "context" and len(loc) == 2:
        return ContextConfig, "context"
    if loc[0] == "hooks" and len(loc) == 4:  # hooks.<event>.<n>.<key>
        return HookMatcher, "hook matcher"
    if loc[0] == "hooks" and len(loc) == 6:  # hooks.<event>.<n>.hooks.<m>.<key>
        return HookCommand, "hook command"
    return Settings, "top-level"


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()


def environment_overrides(env: Mapping[str, str]) -> dict[str, Any]:
    """Settings given as `IFLOW_<key>` variables; strings as they are, other values as JSON."""
    overrides: dict[str, Any] = {}
    for name, field in Settings.model_fields.items():
        key = field.alias or name
        variable = next((v for v in (f"IFLOW_{key}", f"IFLOW_{_snake(key)}") if v in env), None)
        if variable is None:
            continue
        raw = env[variable]
        if field.annotation in (str | None, ApprovalMode, PromptProfile):
            overrides[key] = raw
            continue
        try:
            overrides[key] = json.loads(raw)
        except ValueError as error:
            raise SettingsError(
                f"environment variable {variable} must be JSON ({error}); got {raw!r}"
            ) from error
    return overrides


def load_settings(cwd: Path, env: Mapping[str, str] | None = None) -> Settings:
    """The settings in effect in `cwd` (see the module docstring for the order)."""
    env = os.environ if env is None else env
    merged: dict[str, Any] = {}
    for path in settings_files(cwd, env):
        try:
            data = json.loads(path.read_text())
        except ValueError as error:
            raise SettingsError(f"{path} is not valid JSON ({error}); fix it or move it away") from error
        merged = _merge(merged, _checked(data, str(path)))
    merged = _merge(merged, _checked(environment_overrides(env), "the IFLOW_* environment variables"))
    try:
        return Settings.model_validate(merged)
    except ValidationError as error:
        raise SettingsError(f"the combined settings are invalid: {_explain(error)}") from error
