"""The engine's sampler: one uniform draw per row inverted through the row's cumulative distribution."""

from __future__ import annotations

import pytest
import torch

from roll.engine.torch_engine.sampling import invert_cdf, sample_tokens
from roll.engine.types import SamplingParams


@pytest.mark.parametrize(
    ("uniform", "expected"),
    [(0.0, 0), (0.2499, 0), (0.25, 1), (0.4999, 1), (0.5, 3), (0.9999999, 3)],
)
def test_invert_cdf_maps_each_uniform_to_the_index_whose_mass_holds_it(uniform: float, expected: int) -> None:
    # cdf = [0.25, 0.5, 0.5, 1.0, 1.0]: index 2 and the trailing index 4 hold no mass.
    probs = torch.tensor([0.25, 0.25, 0.0, 0.5, 0.0])
    assert invert_cdf(probs, uniform) == expected


def test_invert_cdf_scales_to_unnormalised_mass_and_never_picks_a_trailing_zero() -> None:
    probs = torch.tensor([0.0, 2.0, 6.0, 0.0, 0.0])  # cdf / total = [0, 0.25, 1, 1, 1]
    assert invert_cdf(probs, 0.0) == 1
    assert invert_cdf(probs, 0.25) == 2
    assert invert_cdf(probs, 1.0 - 2**-53) == 2


def _draws(logits: torch.Tensor, params: SamplingParams, count: int) -> torch.Tensor:
    generators = [torch.Generator().manual_seed(seed) for seed in range(count)]
    rows = logits.expand(count, -1)
    return torch.tensor([t.token_id for t in sample_tokens(rows, [params] * count, generators)])


def test_sampled_frequencies_follow_the_tempered_distribution() -> None:
    logits = torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05]))
    draws = _draws(logits, SamplingParams(temperature=1.0), 8000)
    frequencies = torch.bincount(draws, minlength=4).double() / len(draws)
    expected = torch.tensor([0.5, 0.3, 0.15, 0.05], dtype=torch.float64)
    # 8000 seeded draws: a binomial sd is at most 0.0056, so 4 sd is 0.023.
    assert torch.allclose(frequencies, expected, atol=0.023)
    hot = _draws(logits, SamplingParams(temperature=2.0), 8000)
    tempered = expected.sqrt() / expected.sqrt().sum()  # p ** (1 / T), renormalised
    hot_frequencies = torch.bincount(hot, minlength=4).double() / len(hot)
    assert torch.allclose(hot_frequencies, tempered, atol=0.023)


def test_top_k_and_top_p_are_never_sampled_past() -> None:
    logits = torch.log(torch.tensor([0.4, 0.3, 0.2, 0.1]))
    top_k = _draws(logits, SamplingParams(temperature=1.0, top_k=2), 2000)
    assert set(top_k.tolist()) == {0, 1}
    top_p = _draws(logits, SamplingParams(temperature=1.0, top_p=0.65), 2000)  # 0.4 + 0.3 reaches 0.65
    assert set(top_p.tolist()) == {0, 1}


def test_a_rows_draw_depends_only_on_its_own_seed_and_logits() -> None:
    logits = torch.randn(3, 50, generator=torch.Generator().manual_seed(0))
    params = [
        SamplingParams(temperature=1.0),
        SamplingParams(temperature=0.0),
        SamplingParams(temperature=0.7),
    ]
    together = sample_tokens(logits, params, [torch.Generator().manual_seed(s) for s in (1, 2, 3)])
    alone = sample_tokens(logits[2:], params[2:], [torch.Generator().manual_seed(3)])
    assert together[2].token_id == alone[0].token_id
    assert together[1].token_id == int(logits[1].argmax())
