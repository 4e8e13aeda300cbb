"""Every file shipped under configs/ loads and validates against its schema.

A new config file needs its schema in CONFIG_SCHEMAS (a glob on the path relative to configs/ ->
"module:Class"); JSONL data files under configs/data/ are read with their reader.
"""

from __future__ import annotations

import fnmatch
import importlib
from pathlib import Path

import pytest

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
CONFIG_SCHEMAS = {
    "rome/sft_*.yaml": "roll.sft.config:SFTConfig",
    "rome/ipa_*.yaml": "roll.pipeline.config:TrainConfig",
    "sft*.yaml": "roll.sft.config:SFTConfig",
    "ipa*.yaml": "roll.pipeline.config:TrainConfig",
    "grpo*.yaml": "roll.pipeline.config:TrainConfig",
    "gem_*.yaml": "roll.pipeline.config:TrainConfig",
}
DATA_READERS = {
    "data/*.jsonl": "roll.sft.data:read_examples",
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
    readers = [target for pattern, target in DATA_READERS.items() if fnmatch.fnmatch(name, pattern)]
    if readers:
        assert _resolve(readers[0])(path)
        return
    schemas = [target for pattern, target in CONFIG_SCHEMAS.items() if fnmatch.fnmatch(name, pattern)]
    assert schemas, f"configs/{name} has no schema: add it to CONFIG_SCHEMAS in {__file__}"
    load_config(_resolve(schemas[0]), path)
