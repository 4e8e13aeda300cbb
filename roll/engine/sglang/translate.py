"""Pure translation between our engine types and SGLang's offline-engine API (no sglang or torch import).

Requests: one `GenerateRequest` with n completions becomes n SGLang requests (`Engine.async_generate`
keyword arguments, python/sglang/srt/entrypoints/engine.py; fields of `GenerateReqInput` in
python/sglang/srt/managers/io_struct.py), one per completion, so each gets its own request id (`rid`,
which `TokenizerManager.abort_request` takes) and its own seed (`sampling_seed` + index: SGLang's `n` would
give every copy the same seed).

Responses: SGLang answers a request with a dict `{"text", "output_ids", "meta_info"}` where `meta_info` holds
`id`, `finish_reason` (None while running, else `{"type": "stop", "matched": ...}`,
`{"type": "length", "length": ...}` or `{"type": "abort", "message": ...}`), `prompt_tokens`,
`completion_tokens`, `cached_tokens`, and with `return_logprob` `output_token_logprobs`
(`[(logprob, token_id, text_or_None), ...]`) and, with `top_logprobs_num`, `output_top_logprobs` (per
position a list of such triples, or None). Streamed chunks carry the same keys, cumulative by default
(ServerArgs.stream_output false); `StreamCursor` turns them into deltas either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from roll.engine.protocol import EngineError
from roll.engine.types import Completion, FinishReason, GenerateRequest, SamplingParams, StreamDelta
from roll.types import TensorSpec

# SGLang's `top_k` is -1 for "whole vocabulary" (SamplingParams.__post_init__); ours is 0.
SGLANG_TOP_K_OFF = -1
# Logprobs of the raw distribution (temperature 1, before top-k/top-p), which is what our
# `Completion.logprobs` promises; without it SGLang's sampler reports log_softmax(logits / temperature)
# (python/sglang/srt/layers/sampler.py). SGLang's scheduler processes read it: set before the engine starts.
ORIGINAL_LOGPROB_ENV = "SGLANG_RETURN_ORIGINAL_LOGPROB"
_FINISH_TYPES: dict[str, FinishReason] = {"stop": "stop", "length": "length", "abort": "abort"}


def completion_rid(request_id: str, index: int) -> str:
    """SGLang's request id of completion `index` of our request."""
    return f"{request_id}#{index}"


def sampling_params(params: SamplingParams, index: int) -> dict[str, Any]:
    """SGLang's `sampling_params` for completion `index` (python/sglang/srt/sampling/sampling_params.py)."""
    out: dict[str, Any] = {
        "max_new_tokens": params.max_new_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "top_k": params.top_k if params.top_k > 0 else SGLANG_TOP_K_OFF,
        "ignore_eos": params.ignore_eos,
        "n": 1,
        "skip_special_tokens": True,
    }
    if params.stop:
        out["stop"] = list(params.stop)
    if params.stop_token_ids:
        out["stop_token_ids"] = list(params.stop_token_ids)
    if params.seed is not None:
        out["sampling_seed"] = (params.seed + index) % 2**63
    return out


def generate_kwargs(request: GenerateRequest, index: int, *, stream: bool) -> dict[str, Any]:
    """Keyword arguments of `sglang.Engine.async_generate` for completion `index` of `request`."""
    kwargs: dict[str, Any] = {
        "input_ids": list(request.prompt_token_ids),
        "sampling_params": sampling_params(request.params, index),
        "return_logprob": True,
        # -1: logprobs of output tokens only (prompt logprobs would cost a full-prompt forward).
        "logprob_start_len": -1,
        "rid": completion_rid(request.request_id, index),
        "stream": stream,
    }
    if request.params.top_logprobs > 0:
        kwargs["top_logprobs_num"] = request.params.top_logprobs
    return kwargs


def finish_reason(meta_info: dict[str, Any]) -> FinishReason | None:
    """Our finish reason from SGLang's `meta_info["finish_reason"]` (None: still running)."""
    reason = meta_info.get("finish_reason")
    if reason is None:
        return None
    kind = reason.get("type") if isinstance(reason, dict) else reason
    if kind not in _FINISH_TYPES:
        raise EngineError(
            f"SGLang returned an unknown finish reason {reason!r}; expected stop, length or abort"
        )
    return _FINISH_TYPES[kind]


def abort_message(meta_info: dict[str, Any]) -> str:
    """Why SGLang aborted a request (empty if it did not say)."""
    reason = meta_info.get("finish_reason")
    return str(reason.get("message") or "") if isinstance(reason, dict) else ""


def _token_logprobs(meta_info: dict[str, Any]) -> list[tuple[float, int]]:
    entries = meta_info.get("output_token_logprobs")
    if entries is None:
        raise EngineError(
            "SGLang's answer has no meta_info.output_token_logprobs: the request must set return_logprob=True"
        )
    return [(float(entry[0]), int(entry[1])) for entry in entries]


def _top_logprobs(meta_info: dict[str, Any]) -> list[list[tuple[int, float]]]:
    positions = meta_info.get("output_top_logprobs") or []
    return [[(int(entry[1]), float(entry[0])) for entry in position or []] for position in positions]


def _token_ids(output: dict[str, Any], logprobs: list[tuple[float, int]]) -> list[int]:
    """The generated ids: `output_ids` where SGLang sends them, else the ids beside the logprobs."""
    from_logprobs = [token_id for _, token_id in logprobs]
    ids = output.get("output_ids")
    if ids is None:
        return from_logprobs
    ids = [int(t) for t in ids]
    if len(ids) == len(from_logprobs) and ids != from_logprobs:
        raise EngineError("SGLang's output_ids disagree with the ids of output_token_logprobs")
    return ids


def completion_from_output(index: int, output: dict[str, Any], *, top_logprobs: bool) -> Completion:
    """One finished SGLang answer as completion `index`."""
    meta = output["meta_info"]
    reason = finish_reason(meta)
    if reason is None:
        raise EngineError(f"SGLang answer {meta.get('id')!r} has no finish reason: it is not finished")
    logprobs = _token_logprobs(meta)
    token_ids = _token_ids(output, logprobs)
    if len(token_ids) != len(logprobs):
        raise EngineError(
            f"SGLang answer {meta.get('id')!r} has {len(token_ids)} output ids but {len(logprobs)} logprobs"
        )
    return Completion(
        index=index,
        token_ids=token_ids,
        logprobs=[lp for lp, _ in logprobs],
        top_logprobs=_top_logprobs(meta) if top_logprobs else None,
        text=output.get("text", ""),
        finish_reason=reason,
    )


def _new_part(items: list[Any], total: int, new: int, what: str, rid: Any) -> list[Any]:
    """The last `new` of `items`, which hold either all `total` so far or only the `new` ones."""
    if len(items) == total:
        return items[total - new :]
    if len(items) == new:
        return items
    raise EngineError(
        f"SGLang stream chunk of {rid!r} has {len(items)} {what}; "
        f"expected {total} (cumulative) or {new} (new ones only)"
    )


@dataclass
class StreamCursor:
    """What of one completion's SGLang stream has been handed out, so each chunk becomes a delta.

    `meta_info.completion_tokens` counts all tokens so far. Ids, logprobs and text are cumulative by default
    (every chunk repeats everything so far); with ServerArgs.stream_output, or in older SGLang for logprobs,
    a chunk carries only the new part. Both are told apart by their lengths.
    """

    index: int
    top_logprobs: bool
    tokens: int = 0
    text: str = ""

    def delta(self, chunk: dict[str, Any], weight_version: int) -> StreamDelta:
        meta = chunk["meta_info"]
        rid = meta.get("id")
        total = int(meta["completion_tokens"])
        new = total - self.tokens
        if new < 0:
            raise EngineError(
                f"SGLang stream chunk of {rid!r} reports fewer tokens ({total}) than already seen"
            )
        logprobs = _new_part(_token_logprobs(meta), total, new, "logprobs", rid)
        ids = chunk.get("output_ids")
        token_ids = (
            [token_id for _, token_id in logprobs]
            if ids is None
            else _new_part([int(t) for t in ids], total, new, "output ids", rid)
        )
        tops = _new_part(_top_logprobs(meta), total, new, "top logprobs", rid) if self.top_logprobs else None
        text = chunk.get("text", "")
        new_text = text[len(self.text) :] if text.startswith(self.text) else text
        self.tokens = total
        self.text += new_text
        return StreamDelta(
            index=self.index,
            token_ids=token_ids,
            logprobs=[lp for lp, _ in logprobs],
            top_logprobs=tops,
            text=new_text,
            finish_reason=finish_reason(meta),
            weight_version=weight_version,
        )


@dataclass
class UsageCounters:
    """Token counts summed over finished SGLang answers (from their `meta_info`)."""

    requests_finished: int = 0
    prompt_tokens: int = 0
    prefix_cache_hit_tokens: int = 0
    generated_tokens: int = 0

    def add(self, outputs: Sequence[dict[str, Any]]) -> None:
        """Count one finished request made of these completions' answers."""
        self.requests_finished += 1
        for output in outputs:
            meta = output["meta_info"]
            cached = int(meta.get("cached_tokens", 0))
            self.prompt_tokens += int(meta.get("prompt_tokens", 0)) - cached
            self.prefix_cache_hit_tokens += cached
            self.generated_tokens += int(meta.get("completion_tokens", 0))


def tensor_specs(tensors: Sequence[tuple[str, Any]]) -> list[TensorSpec]:
    """Specs of (name, torch.Tensor) pairs; the dtype as SGLang parses it (`getattr(torch, dtype)`)."""
    return [TensorSpec(name, str(t.dtype).removeprefix("torch."), tuple(t.shape)) for name, t in tensors]


def distributed_update_kwargs(
    specs: Sequence[TensorSpec], group_name: str, *, flush_cache: bool
) -> dict[str, Any]:
    """Fields of SGLang's `UpdateWeightsFromDistributedReqInput` for one bucket of broadcast tensors."""
    return {
        "names": [s.name for s in specs],
        "dtypes": [s.dtype for s in specs],
        "shapes": [list(s.shape) for s in specs],
        "group_name": group_name,
        "flush_cache": flush_cache,
    }


def buckets_by_bytes(sizes: Sequence[tuple[str, int]], max_bytes: int) -> list[list[str]]:
    """Names grouped in order into buckets of at most `max_bytes` (a bigger tensor goes alone)."""
    buckets: list[list[str]] = []
    current: list[str] = []
    used = 0
    for name, size in sizes:
        if current and used + size > max_bytes:
            buckets.append(current)
            current, used = [], 0
        current.append(name)
        used += size
    if current:
        buckets.append(current)
    return buckets
