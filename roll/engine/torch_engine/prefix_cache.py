"""Reuse of the KV of prompt prefixes that earlier requests already computed.

Agent turns resend the whole conversation, and many requests share a system prompt, so a new prompt often
starts with tokens whose keys and values the engine computed moments ago. Entries are token sequences with
their KV, kept least-recently-used within a token budget; a lookup finds the entry with the longest common
prefix and hands out a slice of its KV (keys of a causal model depend only on the tokens before them).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from roll.engine.torch_engine.kv_cache import LayerKV


@dataclass
class _Entry:
    tokens: np.ndarray
    kv: list[LayerKV]


class PrefixCache:
    def __init__(self, max_tokens: int, min_match: int) -> None:
        self.max_tokens = max_tokens
        self.min_match = min_match
        self._entries: OrderedDict[int, _Entry] = OrderedDict()
        self._next_key = 0
        self._tokens = 0

    @property
    def tokens(self) -> int:
        return self._tokens

    def clear(self) -> None:
        self._entries.clear()
        self._tokens = 0

    def lookup(self, tokens: list[int]) -> tuple[int, list[LayerKV] | None]:
        """The longest cached prefix of `tokens` (at least `min_match` long) and its KV, or (0, None)."""
        if not self._entries or len(tokens) < self.min_match:
            return 0, None
        query = np.asarray(tokens)
        best_len, best_key = 0, None
        for key, entry in self._entries.items():
            span = min(len(entry.tokens), len(query))
            differs = np.flatnonzero(entry.tokens[:span] != query[:span])
            common = int(differs[0]) if differs.size else span
            if common > best_len:
                best_len, best_key = common, key
        if best_key is None or best_len < self.min_match:
            return 0, None
        self._entries.move_to_end(best_key)
        kv = self._entries[best_key].kv
        return best_len, [(k[:, :, :best_len], v[:, :, :best_len]) for k, v in kv]

    def insert(self, tokens: list[int], kv: list[LayerKV]) -> None:
        """Remember `kv` for `tokens`; entries that are a prefix of `tokens` are superseded and dropped."""
        if len(tokens) < self.min_match or len(tokens) > self.max_tokens:
            return
        array = np.asarray(tokens)
        for key in [
            key
            for key, entry in self._entries.items()
            if len(entry.tokens) <= len(array) and np.array_equal(entry.tokens, array[: len(entry.tokens)])
        ]:
            self._drop(key)
        self._entries[self._next_key] = _Entry(array, kv)
        self._next_key += 1
        self._tokens += len(array)
        while self._tokens > self.max_tokens:
            self._drop(next(iter(self._entries)))

    def _drop(self, key: int) -> None:
        self._tokens -= len(self._entries.pop(key).tokens)
