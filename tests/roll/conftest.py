"""Session-wide models shared by every roll test: each builtin is loaded once per test session.

- `smollm2`: `builtin:smollm2-135m-instruct` (real 135M Llama, fp32, CPU), converted into the user model
  cache on first use (~25 s once, then ~1 s to load).
- `tiny_moe`: `builtin:tiny-qwen3-moe` (seeded random 6M-parameter Qwen3-MoE, SmolLM2 tokenizer).

Both are shared: never change their weights in place. A test that updates weights loads its own copy with
`roll.models.load_model(...)`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from roll.models import LoadedModel


@pytest.fixture(scope="session")
def smollm2() -> LoadedModel:
    from roll.models import load_model

    return load_model("builtin:smollm2-135m-instruct")


@pytest.fixture(scope="session")
def tiny_moe() -> LoadedModel:
    from roll.models import load_model

    return load_model("builtin:tiny-qwen3-moe")
