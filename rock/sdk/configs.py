"""Config files for every ALE command: a pydantic v2 model read from YAML, with `key.sub=value` overrides.

An unknown key or a bad value raises `ConfigError`, whose message names the key (dotted path) and what is
allowed there. Shared by ROLL's commands (roll.config) and ROCK's servers (`--config FILE --set KEY=VALUE`),
so both read and report config the same way.
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

ConfigT = TypeVar("ConfigT", bound=BaseModel)


class ConfigError(ValueError):
    """A config file or override that does not fit the schema; the message says which key and why."""


def load_config(model: type[ConfigT], path: str | Path | None, overrides: list[str] | None = None) -> ConfigT:
    """Read YAML at `path` (or start empty), apply `key.sub=value` overrides, validate against `model`."""
    data: dict[str, Any] = {}
    if path is not None:
        data = read_yaml(Path(path))
    for override in overrides or []:
        apply_override(data, override)
    return validate_config(model, data, source=str(path) if path else "overrides")


def read_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist; pass the path of a YAML file (see configs/)")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise ConfigError(f"config file {path} is not valid YAML: {error}") from error
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"config file {path} must hold a mapping of keys to values, got {type(data).__name__}"
        )
    return data


def apply_override(data: dict[str, Any], override: str) -> None:
    """Set `a.b.c=value` in nested `data`; the value is parsed as YAML (numbers, booleans, lists, null)."""
    key, sep, raw = override.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"override {override!r} is not of the form key.sub=value (e.g. trainer.lr=1e-5)")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    set_key(data, key.strip(), value, f"override {override!r}")


def set_key(data: dict[str, Any], key: str, value: Any, what: str | None = None) -> None:
    """Set the dotted `key` (a.b.c) in nested `data` to `value`, making the sections on the way."""
    parts = key.split(".")
    node = data
    for depth, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            prefix = ".".join(parts[: depth + 1])
            raise ConfigError(f"{what or key}: {prefix} is a value, not a section with sub-keys")
        node = child
    node[parts[-1]] = value


def validate_config(model: type[ConfigT], data: dict[str, Any], source: str = "config") -> ConfigT:
    try:
        return model.model_validate(data)
    except ValidationError as error:
        lines = [_describe(model, data, err) for err in error.errors()]
        raise ConfigError(f"invalid {source}:\n" + "\n".join(f"  - {line}" for line in lines)) from None


def _describe(model: type[BaseModel], data: dict[str, Any], err: Any) -> str:
    loc, parent = _walk(model, data, [part for part in err["loc"] if isinstance(part, str | int)])
    key = ".".join(str(part) for part in loc) or "<root>"
    if err["type"] == "extra_forbidden":
        allowed = sorted(parent.model_fields) if parent is not None else []
        where = f" (allowed keys: {', '.join(allowed)})" if allowed else ""
        return f"{key}: unknown key{where}"
    if err["type"] == "missing":
        return f"{key}: required key is missing"
    given = err.get("input")
    given_text = f" (got {given!r})" if not isinstance(given, dict) else ""
    return f"{key}: {err['msg']}{given_text}"


def _walk(
    model: type[BaseModel], data: dict[str, Any], loc: list[str | int]
) -> tuple[list[str | int], type[BaseModel] | None]:
    """The location as the user wrote it (union tags that pydantic inserts removed), and the model that
    holds its last key (following discriminated unions by their `type` value)."""
    clean: list[str | int] = []
    current: Any = model
    node: Any = data
    for position, part in enumerate(loc):
        is_model = isinstance(current, type) and issubclass(current, BaseModel)
        if is_model and part not in current.model_fields and position < len(loc) - 1:
            continue  # a discriminated union's tag, already resolved by the previous step
        clean.append(part)
        if position == len(loc) - 1:
            break
        node = node.get(part) if isinstance(node, dict) else None
        current = _model_for(current.model_fields[part].annotation, node) if is_model else None
    parent = current if isinstance(current, type) and issubclass(current, BaseModel) else None
    return clean, parent


def _model_for(annotation: Any, node: Any) -> Any:
    """The BaseModel an annotation resolves to for this value (unions resolved by the value's `type`)."""
    for arg in _flatten(annotation):
        if not (isinstance(arg, type) and issubclass(arg, BaseModel)):
            continue
        type_field = arg.model_fields.get("type")
        if type_field is None or not isinstance(node, dict):
            return arg
        if node.get("type", type_field.default) in typing.get_args(type_field.annotation):
            return arg
    return None


def _flatten(annotation: Any) -> list[Any]:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _flatten(typing.get_args(annotation)[0])
    args = typing.get_args(annotation)
    if args and origin is not None and origin not in (list, dict, tuple):
        return [leaf for arg in args for leaf in _flatten(arg)]
    return [annotation]
