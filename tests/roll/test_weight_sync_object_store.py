"""Weights through Ray's object store go as numpy arrays where they can and arrive with the same values."""

from __future__ import annotations

import numpy as np
import ray
import torch

from roll.pipeline.weight_sync.object_store import from_object_store, to_object_store


def test_host_tensors_go_as_arrays_and_come_back_equal(ray_session: None) -> None:
    torch.manual_seed(0)
    embed = torch.randn(8, 4, requires_grad=True)
    state = {
        "embed.weight": embed,
        "lm_head.weight": embed,  # tied: one storage under two names
        "norm.weight": torch.randn(4, dtype=torch.float16),
        "scale": torch.randn(3, dtype=torch.bfloat16),  # numpy has no bfloat16: stays a tensor
        "steps": torch.tensor([7], dtype=torch.int64),
    }
    wire = to_object_store(state)
    assert isinstance(wire["embed.weight"], np.ndarray) and isinstance(wire["scale"], torch.Tensor)
    back = from_object_store(ray.get(ray.put(wire)))
    assert set(back) == set(state)
    for name, tensor in state.items():
        assert back[name].dtype == tensor.dtype and torch.equal(back[name], tensor.detach()), name
    # What the store hands out is read-only memory: loading copies from it and never writes it.
    assert not ray.get(ray.put(wire))["embed.weight"].flags.writeable
