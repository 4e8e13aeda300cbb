"""The registry of env kinds: `env.type` picks one (roll.rollout.env_kind.EnvKind), and `EnvConfig` is the
config section of any of them (a pydantic union on `type`; a section without `type` is a GEM env)."""

from __future__ import annotations

from typing import Annotated, Any, Union

from pydantic import Discriminator, Tag

from roll.rollout.env_kind import EnvKind
from roll.rollout.gem_kind import GEMKind
from roll.rollout.terminal.kind import TerminalKind

ENV_KINDS: dict[str, EnvKind] = {kind.name: kind for kind in (GEMKind(), TerminalKind())}
"""gem: a GEM env id, played in the rollout worker; terminal: agent-native terminal tasks in ROCK sandboxes,
driven by iflow."""

DEFAULT_ENV_TYPE = "gem"


class UnknownEnvKindError(ValueError):
    """An `env.type` no env kind is registered under; the message names the allowed values."""


def allowed_env_types() -> str:
    return ", ".join(repr(name) for name in ENV_KINDS)


def env_kind(env_type: str) -> EnvKind:
    """The env kind registered under `env_type`."""
    try:
        return ENV_KINDS[env_type]
    except KeyError:
        raise UnknownEnvKindError(
            f"env.type {env_type!r} is not an env kind: set env.type to one of {allowed_env_types()}"
        ) from None


def env_errors() -> tuple[type[Exception], ...]:
    """Every env kind's errors of an env that cannot run (`EnvKind.errors`)."""
    return tuple(error for kind in ENV_KINDS.values() for error in kind.errors())


def default_env_config() -> Any:
    """The `env` section of a config that has none: the default kind's, all defaults."""
    return ENV_KINDS[DEFAULT_ENV_TYPE].config_type()


def _env_type(value: Any) -> str:
    """The env kind a section asks for; a section without `type` is a GEM env."""
    if isinstance(value, dict):
        return str(value.get("type", DEFAULT_ENV_TYPE))
    return str(getattr(value, "type", DEFAULT_ENV_TYPE))


EnvConfig = Annotated[
    Union[tuple(Annotated[kind.config_type, Tag(name)] for name, kind in ENV_KINDS.items())],  # noqa: UP007
    Discriminator(
        _env_type,
        custom_error_type="unknown_env",
        custom_error_message=f"env.type must be one of {allowed_env_types()} (a section without type is "
        f"{DEFAULT_ENV_TYPE!r})",
    ),
]
"""The `env` section of a `roll train` config: the config model of the kind its `type` names."""
