"""Choosing the next token of every row in a decode step, and the logprobs reported for it.

Reported logprobs come from the raw model distribution: log_softmax of the logits at temperature 1, before
top-k/top-p filtering. That is what a plain forward pass of the same weights gives for the same tokens, which
is what a trainer recomputes, so the two can be compared directly.

A sampled row draws its token by inverting the cumulative distribution at one uniform number from the row's
generator. `torch.multinomial` draws a random number for every vocabulary entry instead (an exponential
race), which for SmolLM2's 49,152 entries made sampling a large part of a decode step
(benchmarks/engine_sampling.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from roll.engine.types import SamplingParams


@dataclass
class SampledToken:
    token_id: int
    logprob: float
    top_logprobs: list[tuple[int, float]] | None


def _filtered_probs(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    scaled = logits / params.temperature
    if params.top_k > 0 and params.top_k < scaled.shape[-1]:
        threshold = torch.topk(scaled, params.top_k).values[-1]
        scaled = scaled.masked_fill(scaled < threshold, float("-inf"))
    probs = torch.softmax(scaled, dim=-1)
    if params.top_p < 1.0:
        sorted_probs, order = torch.sort(probs, descending=True)
        mass_before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
        sorted_probs = sorted_probs.masked_fill(mass_before >= params.top_p, 0.0)
        probs = torch.zeros_like(probs).scatter_(-1, order, sorted_probs)
    return probs


def invert_cdf(probs: torch.Tensor, uniform: float) -> int:
    """The index whose share of `probs`' cumulative mass holds `uniform` (in [0, 1)): index i for uniform in
    [cdf[i-1], cdf[i]) / total, so a zero-probability index is never chosen. `probs` need not sum to 1."""
    cdf = probs.cumsum(0, dtype=torch.float64)
    point = uniform * cdf[-1]
    index = int(torch.searchsorted(cdf, point, right=True))
    if index == probs.numel():  # uniform * total rounded up to the total: the last index with mass
        index = int(probs.nonzero()[-1, 0])
    return index


def sample_tokens(
    logits: torch.Tensor, params: list[SamplingParams], generators: list[torch.Generator]
) -> list[SampledToken]:
    """One token per row of `logits` [rows, vocab]; greedy rows take the argmax, others draw from their own
    generator, so a row's choice depends only on its own logits and seed, not on the rest of the batch."""
    logits = logits.float()
    logprobs = torch.log_softmax(logits, dim=-1)
    chosen = torch.argmax(logits, dim=-1)
    for row, row_params in enumerate(params):
        if row_params.temperature > 0:
            probs = _filtered_probs(logits[row], row_params)
            generator = generators[row]
            uniform = float(torch.rand((), dtype=torch.float64, generator=generator, device=generator.device))
            chosen[row] = invert_cdf(probs, uniform)
    chosen_logprobs = logprobs.gather(1, chosen.unsqueeze(1)).squeeze(1).tolist()
    want_top = max(p.top_logprobs for p in params)
    top_values = top_ids = None
    if want_top:
        top = torch.topk(logprobs, want_top, dim=-1)
        top_values, top_ids = top.values.tolist(), top.indices.tolist()
    results = []
    for row, (token_id, logprob) in enumerate(zip(chosen.tolist(), chosen_logprobs, strict=True)):
        k = params[row].top_logprobs
        top_pairs = None
        if k and top_ids is not None and top_values is not None:
            top_pairs = list(zip(top_ids[row][:k], top_values[row][:k], strict=True))
        results.append(SampledToken(token_id, logprob, top_pairs))
    return results
