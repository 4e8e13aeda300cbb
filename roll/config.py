"""Config of every ROLL command: pydantic v2 models from YAML plus `key.sub=value` overrides.

The loader is rock.sdk.configs (shared with ROCK's servers), re-exported here. An unknown key or a bad value
raises `ConfigError`, whose message names the key (dotted path) and what is allowed there. Models should
subclass `StrictConfig` (extra keys forbidden) and pick variants with a `type: Literal[...]` discriminator.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from rock.sdk.configs import ConfigError, apply_override, load_config, read_yaml, validate_config

__all__ = [
    "ConfigError",
    "StrictConfig",
    "apply_override",
    "load_config",
    "read_yaml",
    "type_or_torch",
    "validate_config",
]


def type_or_torch(value: Any) -> str:
    """The variant a trainer or engine section asks for; a section without `type` is the torch one."""
    if isinstance(value, dict):
        return str(value.get("type", "torch"))
    return str(getattr(value, "type", "torch"))


class StrictConfig(BaseModel):
    """Base of every config model: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")
