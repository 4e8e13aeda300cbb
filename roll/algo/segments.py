"""Per-segment reductions: tokens grouped by an index (chunk or trajectory), -1 meaning 'no segment'."""

from __future__ import annotations

import torch


def segment_sum(values: torch.Tensor, index: torch.Tensor, num_segments: int) -> torch.Tensor:
    """Sum of `values` per segment; entries with index -1 are ignored. Differentiable."""
    keep = index >= 0
    out = values.new_zeros(num_segments)
    return out.index_add(0, index[keep], values[keep])


def segment_count(index: torch.Tensor, num_segments: int) -> torch.Tensor:
    """Number of entries per segment (as float), ignoring index -1."""
    return torch.bincount(index[index >= 0], minlength=num_segments).to(torch.float32)


def segment_mean(values: torch.Tensor, index: torch.Tensor, num_segments: int) -> torch.Tensor:
    """Mean of `values` per segment; an empty segment has mean 0."""
    counts = segment_count(index, num_segments).to(values.dtype)
    return segment_sum(values, index, num_segments) / counts.clamp(min=1)
