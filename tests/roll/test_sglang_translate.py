"""Translation between our engine types and SGLang's offline-engine API, against SGLang's documented shapes.

Answers are written the way SGLang's TokenizerManager builds them (python/sglang/srt/managers/
tokenizer_manager.py): `{"text", "output_ids", "meta_info"}` with `finish_reason` dicts and
`output_token_logprobs` as (logprob, token_id, text_or_None) triples.
"""

from __future__ import annotations

import pytest
import torch

from roll.engine.protocol import EngineError
from roll.engine.sglang.translate import (
    StreamCursor,
    UsageCounters,
    abort_message,
    buckets_by_bytes,
    completion_from_output,
    completion_rid,
    distributed_update_kwargs,
    finish_reason,
    generate_kwargs,
    sampling_params,
    tensor_specs,
)
from roll.engine.types import GenerateRequest, SamplingParams
from roll.types import TensorSpec


def _answer(ids, logprobs, text, reason, *, tops=None, with_ids=True, rid="r#0", prompt=5, cached=0):
    meta = {
        "id": rid,
        "finish_reason": reason,
        "prompt_tokens": prompt,
        "completion_tokens": len(ids),
        "cached_tokens": cached,
        "output_token_logprobs": [(lp, t, None) for lp, t in zip(logprobs, ids, strict=True)],
    }
    if tops is not None:
        meta["output_top_logprobs"] = tops
    answer = {"text": text, "meta_info": meta}
    if with_ids:
        answer["output_ids"] = list(ids)
    return answer


def test_sampling_params_defaults() -> None:
    assert sampling_params(SamplingParams(), 0) == {
        "max_new_tokens": 256,
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": -1,
        "ignore_eos": False,
        "n": 1,
        "skip_special_tokens": True,
    }


def test_sampling_params_every_option() -> None:
    params = SamplingParams(
        max_new_tokens=7,
        temperature=0.0,
        top_p=0.9,
        top_k=40,
        stop=["\n\n", "</answer>"],
        stop_token_ids=[2, 5],
        seed=11,
        n=3,
        ignore_eos=True,
    )
    assert sampling_params(params, 2) == {
        "max_new_tokens": 7,
        "temperature": 0.0,
        "top_p": 0.9,
        "top_k": 40,
        "ignore_eos": True,
        "n": 1,
        "skip_special_tokens": True,
        "stop": ["\n\n", "</answer>"],
        "stop_token_ids": [2, 5],
        "sampling_seed": 13,
    }


def test_generate_kwargs_one_sglang_request_per_completion() -> None:
    request = GenerateRequest(request_id="ep7-t2", prompt_token_ids=[1, 2, 3], params=SamplingParams(n=2))
    first, second = (generate_kwargs(request, i, stream=True) for i in range(2))
    assert first == {
        "input_ids": [1, 2, 3],
        "sampling_params": sampling_params(request.params, 0),
        "return_logprob": True,
        "logprob_start_len": -1,
        "rid": "ep7-t2#0",
        "stream": True,
    }
    assert second["rid"] == completion_rid("ep7-t2", 1) == "ep7-t2#1"
    with_tops = request.model_copy(update={"params": SamplingParams(top_logprobs=5)})
    assert generate_kwargs(with_tops, 0, stream=False)["top_logprobs_num"] == 5


@pytest.mark.parametrize(
    ("reason", "ours"),
    [
        ({"type": "stop", "matched": 2}, "stop"),
        ({"type": "stop", "matched": "</answer>"}, "stop"),
        ({"type": "length", "length": 16}, "length"),
        ({"type": "abort", "message": "aborted by the caller"}, "abort"),
        (None, None),
    ],
)
def test_finish_reason(reason, ours) -> None:
    assert finish_reason({"finish_reason": reason}) == ours


def test_unknown_finish_reason_is_an_error() -> None:
    with pytest.raises(EngineError, match="unknown finish reason"):
        finish_reason({"finish_reason": {"type": "timeout"}})
    assert abort_message({"finish_reason": {"type": "abort", "message": "too long"}}) == "too long"
    assert abort_message({"finish_reason": {"type": "length", "length": 3}}) == ""


def test_completion_from_finished_answer() -> None:
    answer = _answer([17, 4, 2], [-0.5, -1.25, -0.125], "hi!", {"type": "stop", "matched": 2})
    completion = completion_from_output(1, answer, top_logprobs=False)
    assert completion.model_dump() == {
        "index": 1,
        "token_ids": [17, 4, 2],
        "logprobs": [-0.5, -1.25, -0.125],
        "top_logprobs": None,
        "text": "hi!",
        "finish_reason": "stop",
    }


def test_completion_top_logprobs_become_id_logprob_pairs() -> None:
    tops = [[(-0.5, 17, None), (-1.5, 9, None)], [(-0.25, 4, "a"), (-2.0, 8, "b")]]
    answer = _answer([17, 4], [-0.5, -0.25], "x", {"type": "length", "length": 2}, tops=tops)
    completion = completion_from_output(0, answer, top_logprobs=True)
    assert completion.top_logprobs == [[(17, -0.5), (9, -1.5)], [(4, -0.25), (8, -2.0)]]
    assert completion.finish_reason == "length"


def test_completion_ids_from_logprobs_when_output_ids_absent() -> None:
    answer = _answer([3, 1], [-0.1, -0.2], "ab", {"type": "length", "length": 2}, with_ids=False)
    assert completion_from_output(0, answer, top_logprobs=False).token_ids == [3, 1]


def test_inconsistent_or_unfinished_answers_are_errors() -> None:
    answer = _answer([3, 1], [-0.1, -0.2], "ab", {"type": "length", "length": 2})
    answer["output_ids"] = [3, 9]
    with pytest.raises(EngineError, match="disagree"):
        completion_from_output(0, answer, top_logprobs=False)
    answer["output_ids"] = [3, 1, 4]
    with pytest.raises(EngineError, match="3 output ids but 2 logprobs"):
        completion_from_output(0, answer, top_logprobs=False)
    with pytest.raises(EngineError, match="not finished"):
        completion_from_output(0, _answer([3], [-0.1], "a", None), top_logprobs=False)
    no_logprobs = _answer([3], [-0.1], "a", {"type": "length", "length": 1})
    del no_logprobs["meta_info"]["output_token_logprobs"]
    with pytest.raises(EngineError, match="return_logprob"):
        completion_from_output(0, no_logprobs, top_logprobs=False)


STEPS = [  # (ids so far, logprobs so far, text so far, finish reason)
    ([5], [-0.5], "He", None),
    ([5, 6, 7], [-0.5, -0.25, -1.0], "Hello", None),
    ([5, 6, 7, 2], [-0.5, -0.25, -1.0, -0.125], "Hello!", {"type": "stop", "matched": 2}),
]
EXPECTED = [
    ([5], [-0.5], "He", None),
    ([6, 7], [-0.25, -1.0], "llo", None),
    ([2], [-0.125], "!", "stop"),
]


def test_stream_cursor_on_cumulative_chunks() -> None:
    cursor = StreamCursor(index=3, top_logprobs=False)
    deltas = [cursor.delta(_answer(i, lp, t, r), weight_version=4) for i, lp, t, r in STEPS]
    assert [(d.token_ids, d.logprobs, d.text, d.finish_reason) for d in deltas] == EXPECTED
    assert {(d.index, d.weight_version) for d in deltas} == {(3, 4)}


def test_stream_cursor_on_incremental_chunks() -> None:
    cursor = StreamCursor(index=0, top_logprobs=False)
    seen = 0
    deltas = []
    for (ids, lps, _, reason), (_, _, new_text, _) in zip(STEPS, EXPECTED, strict=True):
        chunk = _answer(ids[seen:], lps[seen:], new_text, reason)
        chunk["meta_info"]["completion_tokens"] = len(ids)  # SGLang counts all tokens so far
        seen = len(ids)
        deltas.append(cursor.delta(chunk, weight_version=0))
    assert [(d.token_ids, d.logprobs, d.text, d.finish_reason) for d in deltas] == EXPECTED


def test_stream_cursor_cumulative_ids_with_incremental_logprobs() -> None:
    """Older SGLang streams only the new logprobs while output_ids and text are cumulative."""
    cursor = StreamCursor(index=0, top_logprobs=True)
    first = _answer([5], [-0.5], "He", None, tops=[[(-0.5, 5, None)]])
    second = _answer([5, 6], [-0.5, -0.25], "Hel", None, tops=[[(-0.5, 5, None)], [(-0.25, 6, None)]])
    second["meta_info"]["output_token_logprobs"] = [(-0.25, 6, None)]
    second["meta_info"]["output_top_logprobs"] = [[(-0.25, 6, None)]]
    deltas = [cursor.delta(first, 0), cursor.delta(second, 0)]
    assert [(d.token_ids, d.logprobs, d.top_logprobs, d.text) for d in deltas] == [
        ([5], [-0.5], [[(5, -0.5)]], "He"),
        ([6], [-0.25], [[(6, -0.25)]], "l"),
    ]


def test_stream_cursor_rejects_chunks_that_fit_neither_shape() -> None:
    cursor = StreamCursor(index=0, top_logprobs=False)
    cursor.delta(_answer([5, 6], [-0.5, -0.25], "ab", None), 0)
    chunk = _answer([5, 6, 7, 8], [-0.5, -0.25, -1.0, -1.0], "abcd", None)
    chunk["meta_info"]["output_token_logprobs"] = chunk["meta_info"]["output_token_logprobs"][:3]
    with pytest.raises(EngineError, match="3 logprobs; expected 4"):
        cursor.delta(chunk, 0)


def test_usage_counters_split_prefilled_and_cached_prompt_tokens() -> None:
    usage = UsageCounters()
    usage.add(
        [
            _answer([1, 2], [-0.1, -0.1], "", {"type": "length", "length": 2}, prompt=10, cached=0),
            _answer([1], [-0.1], "", {"type": "stop", "matched": 1}, prompt=10, cached=8),
        ]
    )
    assert (usage.requests_finished, usage.prompt_tokens, usage.prefix_cache_hit_tokens) == (1, 12, 8)
    assert usage.generated_tokens == 3


def test_tensor_specs_and_distributed_update_fields() -> None:
    named = [
        ("model.embed_tokens.weight", torch.zeros(4, 3, dtype=torch.bfloat16)),
        ("lm_head.bias", torch.zeros(4)),
    ]
    specs = tensor_specs(named)
    assert specs == [
        TensorSpec("model.embed_tokens.weight", "bfloat16", (4, 3)),
        TensorSpec("lm_head.bias", "float32", (4,)),
    ]
    assert all(getattr(torch, s.dtype) == t.dtype for s, (_, t) in zip(specs, named, strict=True))
    assert distributed_update_kwargs(specs, "roll-weights", flush_cache=False) == {
        "names": ["model.embed_tokens.weight", "lm_head.bias"],
        "dtypes": ["bfloat16", "float32"],
        "shapes": [[4, 3], [4]],
        "group_name": "roll-weights",
        "flush_cache": False,
    }


def test_buckets_by_bytes_keep_order_and_put_big_tensors_alone() -> None:
    sizes = [("a", 40), ("b", 50), ("c", 20), ("big", 500), ("d", 10)]
    assert buckets_by_bytes(sizes, 100) == [["a", "b"], ["c"], ["big"], ["d"]]
    assert buckets_by_bytes([], 100) == []
