"""Every file shipped under configs/ loads and validates against its schema.

A new config file needs its schema in CONFIG_SCHEMAS (file name relative to configs/ -> "module:Class").
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
CONFIG_SCHEMAS = {
    "sft.yaml": "roll.sft.config:SFTConfig",
}
DATA_READERS = {
    "data/sft_sample.jsonl": "roll.sft.data:read_examples",
}


def _resolve(target: str):
    module, name = target.split(":")
    return getattr(importlib.import_module(module), name)


def _shipped() -> list[str]:
    return sorted(str(p.relative_to(CONFIGS)) for p in CONFIGS.rglob("*") if p.is_file())


@pytest.mark.parametrize("name", _shipped())
def test_config_file_validates(name: str) -> None:
    from roll.config import load_config

    path = CONFIGS / name
    if name in DATA_READERS:
        assert _resolve(DATA_READERS[name])(path)
        return
    assert name in CONFIG_SCHEMAS, f"configs/{name} has no schema: add it to CONFIG_SCHEMAS in {__file__}"
    load_config(_resolve(CONFIG_SCHEMAS[name]), path)
