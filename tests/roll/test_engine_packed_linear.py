"""The engine's packed oneDNN linears compute what the model's own linears compute, and only while active."""

from __future__ import annotations

import pytest
import torch

from roll.engine.torch_engine.packed_linear import PackedLinears, packing_supported
from roll.models import LoadedModel


def _logits(loaded: LoadedModel, ids: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        return loaded.model(input_ids=ids).logits


@pytest.mark.parametrize("rows", [1, 5])
def test_packed_linears_match_the_model_and_switch_off_again(smollm2: LoadedModel, rows: int) -> None:
    assert packing_supported(smollm2.model)
    ids = torch.randint(0, 1000, (rows, 7), generator=torch.Generator().manual_seed(rows))
    plain = _logits(smollm2, ids)
    linears = PackedLinears(smollm2.model)
    linears.pack()
    with linears.active():
        packed = _logits(smollm2, ids)
    # Float32 rounding of another summation order, accumulated over 30 layers: ~1e-5 of the logits' scale.
    assert (packed - plain).abs().max() <= 2e-5 * plain.abs().max()
    assert not any("forward" in vars(m) for m in smollm2.model.modules())
    assert torch.equal(_logits(smollm2, ids), plain)


def test_repacking_follows_changed_weights(smollm2: LoadedModel) -> None:
    head = smollm2.model.lm_head
    x = torch.randn(3, head.in_features)
    linears = PackedLinears(smollm2.model)
    linears.pack()
    original = head.weight.detach().clone()
    try:
        with torch.no_grad():
            head.weight.mul_(2.0)
        linears.pack()
        with torch.inference_mode(), linears.active():
            doubled = head(x)
    finally:
        with torch.no_grad():
            head.weight.copy_(original)
    assert torch.allclose(doubled, 2.0 * torch.nn.functional.linear(x, original), atol=1e-4, rtol=1e-5)


def test_bfloat16_packing_computes_the_linears_as_bf16_autocast_does(smollm2: LoadedModel) -> None:
    ids = torch.randint(0, 1000, (3, 7), generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        plain = smollm2.model(input_ids=ids).logits
        with torch.autocast("cpu", dtype=torch.bfloat16):
            autocast = smollm2.model(input_ids=ids).logits.float()
    linears = PackedLinears(smollm2.model, torch.bfloat16)
    linears.pack()
    with linears.active():
        packed = _logits(smollm2, ids)
    assert packed.dtype == torch.float32
    # bf16 keeps 8 bits of mantissa: the packed pass strays from float32 about as far as autocast does
    # (0.072 and 0.081 on average here, logits up to 33), far past float32 rounding, and the next token
    # agrees with float32's at most positions.
    strays = (packed - plain).abs().mean()
    assert strays <= 1.5 * (autocast - plain).abs().mean()
    assert strays > 1e-2  # float32's packed pass stays within ~1e-5 of the logits' scale
    assert (packed.argmax(-1) == plain.argmax(-1)).float().mean() >= 0.85
