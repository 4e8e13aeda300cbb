"""`--config FILE --set KEY=VALUE` for ROCK's servers: their settings are one pydantic model (AdminConfig,
WorkerConfig, ProxyConfig), read from a YAML file of that model, then the command's own flags, then
`--set` overrides (dotted keys, YAML values), and validated once. Every field of the model can be set, and
an unknown key or a bad value is an error that names it (rock.sdk.configs).

Light on purpose: `rock --help` imports every CLI module, so pydantic and the models load only when a
command runs."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

ConfigFileOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="YAML file of the settings (the fields of the command's config model); flags and --set "
        "override it.",
    ),
]
SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="KEY=VALUE",
        help="Set one field of the config model by its dotted key, the value parsed as YAML (e.g. --set "
        "limits.max_cpus=4); repeatable, applied last.",
    ),
]


def config_data(path: Path | None, flags: Mapping[str, Any], sets: list[str] | None) -> dict[str, Any]:
    """The YAML file's mapping (or an empty one), with every flag that was given (`flags`: dotted key ->
    value, None or [] when not given) set at its key, then the --set overrides applied."""
    from rock.sdk.configs import apply_override, read_yaml, set_key

    data = read_yaml(path) if path is not None else {}
    for key, value in flags.items():
        if value is not None and value != []:  # a repeatable option given no times is empty
            set_key(data, key, value)
    for override in sets or []:
        apply_override(data, override)
    return data


def source(path: Path | None) -> str:
    """How a config error names where the settings came from."""
    return f"settings ({path} with flags and --set)" if path is not None else "settings (flags and --set)"
