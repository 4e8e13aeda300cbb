"""Incremental detokenization of one completion, with stop strings.

Decoding a token on its own can give a different string than decoding it in context (a multi-byte character
split over tokens, a tokenizer that drops a leading space), so each step decodes a short window of recent
tokens and emits only the text that became final. Text that could still be the start of a stop string is held
back from the stream until it is clear that it is not.
"""

from __future__ import annotations

from transformers import PreTrainedTokenizerBase

_INCOMPLETE = "\ufffd"  # what a partial UTF-8 sequence decodes to


class IncrementalDetokenizer:
    def __init__(self, tokenizer: PreTrainedTokenizerBase, stop: list[str]) -> None:
        self._tokenizer = tokenizer
        self._stop = [s for s in stop if s]
        self._holdback = max((len(s) for s in self._stop), default=1) - 1
        self._ids: list[int] = []
        self._prefix_offset = 0
        self._read_offset = 0
        self._emitted = 0
        self.text = ""
        self.stopped = False

    def _decode(self, ids: list[int]) -> str:
        return self._tokenizer.decode(ids, skip_special_tokens=True)

    def add(self, token_id: int) -> None:
        """Take one more generated token; sets `stopped` and cuts `text` when a stop string appears."""
        self._ids.append(token_id)
        before = self._decode(self._ids[self._prefix_offset : self._read_offset])
        after = self._decode(self._ids[self._prefix_offset :])
        if len(after) <= len(before) or after.endswith(_INCOMPLETE):
            return
        searched_from = max(0, len(self.text) - self._holdback)
        self.text += after[len(before) :]
        self._prefix_offset = self._read_offset
        self._read_offset = len(self._ids)
        found = [i for i in (self.text.find(s, searched_from) for s in self._stop) if i >= 0]
        if found:
            self.text = self.text[: min(found)]
            self.stopped = True

    def flush(self) -> None:
        """At the end of a completion, also take text still waiting for the rest of a character."""
        if self.stopped or self._read_offset == len(self._ids):
            return
        before = self._decode(self._ids[self._prefix_offset : self._read_offset])
        after = self._decode(self._ids[self._prefix_offset :])
        self.text += after[len(before) :]
        self._read_offset = len(self._ids)

    def take_new_text(self, final: bool) -> str:
        """The text not yet handed out; while a stop string may still be forming, its possible start waits."""
        end = len(self.text) if final or self.stopped else max(self._emitted, len(self.text) - self._holdback)
        new = self.text[self._emitted : end]
        self._emitted = end
        return new
