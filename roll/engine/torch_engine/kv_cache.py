"""The running batch's KV cache: a prefix every row shares, stored once, and one preallocated buffer per layer
whose rows, left-padded to a shared length, hold what follows that prefix in each sequence.

The shared prefix is the longest common start of all running rows' tokens (a system prompt and tool schemas);
it is kept only while at least `min_shared` tokens long, and decode steps attend to it once for all rows
(see shared_attention.py). Row i holds the keys and values of its tokens after the prefix in columns
[start_i, length); columns before start_i are padding that the attention mask hides.

Every decode step writes one new column for all rows at once, so a step costs one in-place write per layer
instead of a concatenation. Rows join with a KV of any length (the buffer grows or shifts when a joining row
is longer than the batch) and leave by moving the last row into their slot, so the live rows are always the
first `rows` of the buffer.
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
        self,
        num_layers: int,
        kv_heads: int,
        head_dim: int,
        dtype: torch.dtype,
        device: torch.device,
        min_shared: int,
    ) -> None:
        self.num_layers = num_layers
        self.kv_heads = kv_heads
        self.head_dim = head_dim
        self.dtype = dtype
        self.device = device
        self.rows = 0
        self.length = 0
        self.starts: list[int] = []
        self.min_shared = min_shared
        self.shared_tokens: list[int] = []
        self._shared: list[LayerKV] = []
        self._keys: list[torch.Tensor] = []
        self._values: list[torch.Tensor] = []

    @property
    def capacity(self) -> tuple[int, int]:
        if not self._keys:
            return 0, 0
        return self._keys[0].shape[0], self._keys[0].shape[2]

    @property
    def shared_length(self) -> int:
        return len(self.shared_tokens)

    def nbytes(self) -> int:
        shared = [t for pair in self._shared for t in pair]
        return sum(t.numel() * t.element_size() for t in (*self._keys, *self._values, *shared))

    def shared_kv(self) -> list[LayerKV] | None:
        """Per layer the shared prefix's keys and values, [kv_heads, P, head_dim]; None without a prefix."""
        if not self.shared_tokens:
            return None
        return [(k[0], v[0]) for k, v in self._shared]

    def release(self) -> None:
        """Drop every row and free the buffers."""
        self.rows = 0
        self.length = 0
        self.starts = []
        self.shared_tokens = []
        self._shared = []
        self._keys = []
        self._values = []

    def context_length(self, row: int) -> int:
        return self.shared_length + self.length - self.starts[row]

    def add(self, kv: list[LayerKV] | None, tokens: list[int], copies: int) -> None:
        """Append `copies` rows holding `kv`, the keys and values of `tokens` (None when there are none)."""
        if self.rows == 0:
            # Alone in the batch, the row's whole context is "shared" until a row with other tokens joins.
            self.shared_tokens, self._shared = [], []
            if kv is not None and len(tokens) >= self.min_shared:
                self.shared_tokens = list(tokens)
                self._shared = list(kv)
        else:
            common = _common_prefix_length(self.shared_tokens, tokens)
            if common < self.shared_length:
                self._shrink_shared(common if common >= self.min_shared else 0)
        shared, kv_length = self.shared_length, len(tokens)
        own = kv_length - shared
        self._reserve(self.rows + copies, own)
        start = self.length - own
        for layer in range(self.num_layers):
            if kv is None or own == 0:
                continue
            keys, values = kv[layer]
            self._keys[layer][self.rows : self.rows + copies, :, start : self.length] = keys[:, :, shared:]
            self._values[layer][self.rows : self.rows + copies, :, start : self.length] = values[
                :, :, shared:
            ]
        self.starts.extend([start] * copies)
        self.rows += copies

    def _shrink_shared(self, length: int) -> None:
        """Keep only the first `length` tokens shared; the rest moves into every row, left of its columns."""
        moved = self.shared_length - length
        longest = max(self.length - start for start in self.starts)
        self._reserve(self.rows, longest + moved)
        for layer, (keys, values) in enumerate(self._shared):
            for row, start in enumerate(self.starts):
                self._keys[layer][row, :, start - moved : start] = keys[0, :, length:]
                self._values[layer][row, :, start - moved : start] = values[0, :, length:]
        self.starts = [start - moved for start in self.starts]
        self.shared_tokens = self.shared_tokens[:length]
        self._shared = [(k[:, :, :length], v[:, :, :length]) for k, v in self._shared] if length else []

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
            self.shared_tokens, self._shared = [], []

    def row_kv(self, row: int) -> list[LayerKV]:
        """A copy of one row's cached keys and values (the shared prefix included), without padding."""
        start = self.starts[row]
        shared = self._shared or [
            (k[:1, :, :0], v[:1, :, :0]) for k, v in zip(self._keys, self._values, strict=True)
        ]
        return [
            (
                torch.cat([shared_k, k[row : row + 1, :, start : self.length]], dim=2),
                torch.cat([shared_v, v[row : row + 1, :, start : self.length]], dim=2),
            )
            for (shared_k, shared_v), k, v in zip(shared, self._keys, self._values, strict=True)
        ]

    def prepare_step(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Make room for one more column; return the position ids [rows, 1] and the attention mask."""
        self._reserve(self.rows, 0)
        starts = torch.tensor(self.starts, device=self.device)
        positions = (self.shared_length + self.length - starts).unsqueeze(1)
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


def _common_prefix_length(a: list[int], b: list[int]) -> int:
    span = min(len(a), len(b))
    if a[:span] == b[:span]:
        return span
    return next(i for i in range(span) if a[i] != b[i])


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
        return self._batch.shared_length + self._batch.length
