"""The running batch's KV cache: one preallocated buffer per layer, rows left-padded to a shared length.

Row i holds its sequence's keys and values in columns [start_i, length); columns before start_i are padding
that the attention mask hides. Every decode step writes one new column for all rows at once, so a step costs
one in-place write per layer instead of a concatenation. Rows join with a KV of any length (the buffer grows
or shifts when a joining row is longer than the batch) and leave by moving the last row into their slot, so
the live rows are always the first `rows` of the buffer.
"""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache

LayerKV = tuple[torch.Tensor, torch.Tensor]  # keys and values, [1, kv_heads, length, head_dim]

_LENGTH_QUANTUM = 128  # grow the column capacity in steps of this many tokens to make reallocations rare


def _round_up(value: int, quantum: int) -> int:
    return -(-value // quantum) * quantum


class BatchKVCache:
    def __init__(
        self, num_layers: int, kv_heads: int, head_dim: int, dtype: torch.dtype, device: torch.device
    ) -> None:
        self.num_layers = num_layers
        self.kv_heads = kv_heads
        self.head_dim = head_dim
        self.dtype = dtype
        self.device = device
        self.rows = 0
        self.length = 0
        self.starts: list[int] = []
        self._keys: list[torch.Tensor] = []
        self._values: list[torch.Tensor] = []

    @property
    def capacity(self) -> tuple[int, int]:
        if not self._keys:
            return 0, 0
        return self._keys[0].shape[0], self._keys[0].shape[2]

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self._keys, *self._values))

    def release(self) -> None:
        """Drop every row and free the buffers."""
        self.rows = 0
        self.length = 0
        self.starts = []
        self._keys = []
        self._values = []

    def context_length(self, row: int) -> int:
        return self.length - self.starts[row]

    def add(self, kv: list[LayerKV] | None, kv_length: int, copies: int) -> None:
        """Append `copies` rows that all hold `kv` (None when the sequence has no cached tokens yet)."""
        self._reserve(self.rows + copies, kv_length)
        start = self.length - kv_length
        for layer in range(self.num_layers):
            if kv is None or kv_length == 0:
                continue
            keys, values = kv[layer]
            self._keys[layer][self.rows : self.rows + copies, :, start : self.length] = keys
            self._values[layer][self.rows : self.rows + copies, :, start : self.length] = values
        self.starts.extend([start] * copies)
        self.rows += copies

    def remove(self, row: int) -> None:
        """Drop one row; the last row moves into its slot."""
        last = self.rows - 1
        if row != last:
            for buffer in (*self._keys, *self._values):
                buffer[row, :, : self.length] = buffer[last, :, : self.length]
            self.starts[row] = self.starts[last]
        self.starts.pop()
        self.rows -= 1
        if self.rows == 0:
            self.length = 0

    def row_kv(self, row: int) -> list[LayerKV]:
        """A copy of one row's cached keys and values, without padding."""
        start = self.starts[row]
        return [
            (
                k[row : row + 1, :, start : self.length].clone(),
                v[row : row + 1, :, start : self.length].clone(),
            )
            for k, v in zip(self._keys, self._values, strict=True)
        ]

    def prepare_step(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Make room for one more column; return the position ids [rows, 1] and the attention mask."""
        self._reserve(self.rows, 0)
        starts = torch.tensor(self.starts, device=self.device)
        positions = (self.length - starts).unsqueeze(1)
        columns = torch.arange(self.length + 1, device=self.device)
        mask = (columns.unsqueeze(0) >= starts.unsqueeze(1)).view(self.rows, 1, 1, self.length + 1)
        return positions, mask

    def write(
        self, layer: int, keys: torch.Tensor, values: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        end = self.length + keys.shape[2]
        self._keys[layer][: self.rows, :, self.length : end] = keys
        self._values[layer][: self.rows, :, self.length : end] = values
        return self._keys[layer][: self.rows, :, :end], self._values[layer][: self.rows, :, :end]

    def finish_step(self) -> None:
        self.length += 1

    def view(self) -> Cache:
        return _StepCacheView(self)

    def _reserve(self, rows: int, min_length: int) -> None:
        """Make room for `rows` rows, at least `min_length` columns, and one more decode step.

        A joining row longer than the batch moves the live columns right. Leading columns that every row pads
        are dropped whenever the buffer is reallocated (or once they are worth a copy), so the batch never
        spends attention on columns nobody reads.
        """
        trim = min(self.starts) if self.starts else self.length
        row_cap, len_cap = self.capacity
        fits = rows <= row_cap and self.length + 1 <= len_cap
        if fits and self.length >= min_length and trim < _LENGTH_QUANTUM:
            return
        kept = self.length - trim
        new_length = max(kept, min_length)
        shift = new_length - kept
        new_rows = max(rows, 2 * row_cap, 4) if rows > row_cap else row_cap
        shape = (
            new_rows,
            self.kv_heads,
            _round_up(new_length + 1 + _LENGTH_QUANTUM, _LENGTH_QUANTUM),
            self.head_dim,
        )
        # Zeros, not empty: padded columns get a zero attention weight, and 0 * NaN from garbage would be NaN.
        new_keys = [torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in range(self.num_layers)]
        new_values = [
            torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in range(self.num_layers)
        ]
        if self.rows and kept:
            for old, new in zip((*self._keys, *self._values), (*new_keys, *new_values), strict=True):
                new[: self.rows, :, shift : shift + kept] = old[: self.rows, :, trim : self.length]
        self._keys, self._values = new_keys, new_values
        self.starts = [s - trim + shift for s in self.starts]
        self.length = new_length


class _StepCacheView(Cache):
    """What the transformers model sees during one decode step: writes go to the batch cache's next column."""

    def __init__(self, batch: BatchKVCache) -> None:
        super().__init__(layers=[])
        self._batch = batch

    def update(
        self,
        key_states: torch.Tensor,
        value_states: torch.Tensor,
        layer_idx: int,
        *args: object,
        **kwargs: object,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return self._batch.write(layer_idx, key_states, value_states)

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self._batch.length
