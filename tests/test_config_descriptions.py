"""Every config field says what it is: each field of every pydantic model used as configuration (the YAML of
`roll train` and `roll sft`, rock's admin, worker and proxy settings, iflow's settings, the data recipe,
`rome data collect`'s and `filter`'s settings, and every model they nest) has a non-empty description.

The models are found, not listed: every BaseModel defined in a config module (roll/**/config.py,
rock/**/config.py, and the *_config.py modules beside them) plus the roots below, walked through every
field's type (unions, lists, dicts and Optional included)."""

from __future__ import annotations

import importlib
import pkgutil
import typing
from pathlib import Path

from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[1]
CONFIG_PACKAGES = ("roll", "rock")
# Configs that live outside a module named config.py.
ROOTS = (
    "iflow.settings:Settings",
    "iflow.agent.runtime:AgentConfig",
    "iflow.llm:LLMConfig",
    "rock.proxy.types:ProxyConfig",
    "rome.data.collect:CollectSettings",
    "rome.data.filter:HeuristicLimits",
)


def _config_modules() -> list[str]:
    names = []
    for package in CONFIG_PACKAGES:
        for info in pkgutil.walk_packages([str(ROOT / package)], prefix=f"{package}."):
            leaf = info.name.rsplit(".", 1)[-1]
            if leaf == "config" or leaf.endswith("_config"):
                names.append(info.name)
    return names


def _models_in(annotation: object) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in typing.get_args(annotation) for model in _models_in(arg)]


def config_models() -> list[type[BaseModel]]:
    found: list[type[BaseModel]] = []
    for name in _config_modules():
        module = importlib.import_module(name)
        found += [
            obj
            for obj in vars(module).values()
            if isinstance(obj, type) and issubclass(obj, BaseModel) and obj.__module__ == module.__name__
        ]
    for root in ROOTS:
        module, _, attribute = root.partition(":")
        found.append(getattr(importlib.import_module(module), attribute))
    seen: dict[type[BaseModel], None] = {}
    while found:
        model = found.pop()
        if model in seen:
            continue
        seen[model] = None
        for field in model.model_fields.values():
            found += _models_in(field.annotation)
    return list(seen)


def test_the_walk_finds_the_configs() -> None:
    names = {model.__name__ for model in config_models()}
    for expected in ("TrainConfig", "SFTConfig", "TerminalDataConfig", "AdminConfig", "WorkerConfig"):
        assert expected in names
    assert {"Settings", "ContextConfig", "HookCommand", "CollectSettings", "MegatronBackendConfig"} <= names


def test_every_config_field_has_a_description() -> None:
    missing = [
        f"{model.__module__}.{model.__name__}.{name}"
        for model in config_models()
        for name, field in model.model_fields.items()
        if not (field.description or "").strip()
    ]
    assert not missing, "config fields without a description (add Field(description=...)):\n" + "\n".join(
        sorted(missing)
    )
