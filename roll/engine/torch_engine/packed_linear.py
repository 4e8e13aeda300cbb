"""The model's linear layers through oneDNN with weights packed once, for the engine's own passes on CPU.

transformers' `nn.Linear` calls MKL's sgemm, which at the few rows of a decode step runs far below the CPU's
speed: on 2 cores the lm head of SmolLM2-135M (49,152 x 576) took 40 ms for 16 rows through sgemm and 11 ms
through oneDNN with its weight packed ahead of time; a decoder layer's seven linears 3.0 ms against 1.5 ms.
Prefill chunks (256 rows) gain less (~18%). The results agree with sgemm's to float32 rounding (~1e-5 on
logits), as two sgemm calls with different row counts do among themselves.

With `matmul_dtype: bfloat16` the packed weights are bfloat16 and each linear casts its input to bfloat16
and its output back, as a trainer under bf16 autocast computes them; on a CPU with AMX or avx512_bf16 that
made the lm head 3x and a decoder layer's linears 4-5x faster than packed float32 (16 rows, one thread).

The engine packs every `nn.Linear` weight once (again after a weight update or wake; it drops them while
asleep) and routes the modules through the packed weights only inside its own forward passes, so the model
stays a plain transformers model for everyone else.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial

import torch

_ROWS_HINT = 16  # the row count oneDNN tunes the packed layout for; any row count works with it


def _packed_forward(packed: torch.Tensor, bias: torch.Tensor | None, x: torch.Tensor) -> torch.Tensor:
    out = torch.ops.mkldnn._linear_pointwise(x.to(packed.dtype).contiguous(), packed, bias, "none", [], "")
    return out.to(x.dtype)


def packing_supported(model: torch.nn.Module) -> bool:
    parameter = next(model.parameters())
    return (
        parameter.device.type == "cpu"
        and parameter.dtype == torch.float32
        and torch.backends.mkldnn.is_available()
    )


class PackedLinears:
    """Packed copies of a model's linear weights, in `dtype`; `active()` makes the model compute with them."""

    def __init__(self, model: torch.nn.Module, dtype: torch.dtype = torch.float32) -> None:
        self._model = model
        self._dtype = dtype
        self._packed: list[tuple[torch.nn.Linear, torch.Tensor, torch.Tensor | None]] = []

    def pack(self) -> None:
        """Pack the current weights (after loading, a weight update or wake)."""
        with torch.inference_mode():
            self._packed = [
                (
                    module,
                    torch.ops.mkldnn._reorder_linear_weight(
                        module.weight.detach().to(self._dtype), _ROWS_HINT
                    ),
                    None if module.bias is None else module.bias.detach().to(self._dtype),
                )
                for module in self._model.modules()
                if isinstance(module, torch.nn.Linear)
            ]

    def drop(self) -> None:
        self._packed = []

    @contextmanager
    def active(self) -> Iterator[None]:
        for module, packed, bias in self._packed:
            module.forward = partial(_packed_forward, packed, bias)  # type: ignore[method-assign]
        try:
            yield
        finally:
            for module, _, _ in self._packed:
                del module.forward
