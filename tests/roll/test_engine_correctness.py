"""The torch engine computes what transformers computes: greedy tokens and logprobs, under batching."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import torch

from roll.engine.protocol import EngineError, InferenceEngine
from roll.engine.reference import forward_logprobs, greedy_generate
from roll.engine.torch_engine import TorchEngine, TorchEngineConfig
from roll.engine.types import GenerateRequest, SamplingParams
from roll.models import LoadedModel

# Small chunks so the long prompt is prefilled over several steps while the short ones already decode.
CHUNKED = TorchEngineConfig(prefill_chunk_tokens=32, prefix_min_match=8)


async def _started(loaded: LoadedModel, config: TorchEngineConfig = CHUNKED) -> AsyncIterator[TorchEngine]:
    engine = TorchEngine(loaded, config)
    await engine.start()
    try:
        yield engine
    finally:
        await engine.shutdown()


def request(request_id: str, prompt: list[int], **params: object) -> GenerateRequest:
    return GenerateRequest(request_id=request_id, prompt_token_ids=prompt, params=SamplingParams(**params))


def prompts_of_mixed_lengths(loaded: LoadedModel) -> list[list[int]]:
    """A one-token prompt, two short ones and one long enough to need several prefill chunks."""
    texts = [
        "Hi",
        "What is the capital of France? Answer briefly.",
        "List three colours of the rainbow:",
        "The history of the sea: " + "waves come and go, tides rise and fall, ships sail far away. " * 12,
    ]
    return [loaded.tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]


@pytest.fixture
async def moe_engine(tiny_moe: LoadedModel) -> AsyncIterator[TorchEngine]:
    async for engine in _started(tiny_moe):
        yield engine


@pytest.fixture
async def smol_engine(smollm2: LoadedModel) -> AsyncIterator[TorchEngine]:
    async for engine in _started(smollm2):
        yield engine


def test_torch_engine_implements_the_protocol(tiny_moe: LoadedModel) -> None:
    engine = TorchEngine(tiny_moe)
    assert isinstance(engine, InferenceEngine)
    assert engine.max_context == tiny_moe.max_context


async def _assert_concurrent_greedy_matches(
    engine: TorchEngine, loaded: LoadedModel, new_tokens: int
) -> None:
    prompts = prompts_of_mixed_lengths(loaded)
    assert len(prompts[0]) == 1 and len(prompts[-1]) > 3 * CHUNKED.prefill_chunk_tokens
    results = await asyncio.gather(
        *[
            engine.generate(request(f"r{i}", p, temperature=0.0, max_new_tokens=new_tokens))
            for i, p in enumerate(prompts)
        ]
    )
    for prompt, result in zip(prompts, results, strict=True):
        assert result.prompt_token_ids == prompt
        assert result.completions[0].token_ids == greedy_generate(loaded, prompt, new_tokens)
    assert engine.stats().running == 0


@pytest.mark.slow
async def test_concurrent_greedy_equals_transformers_generate_smollm2(
    smol_engine: TorchEngine, smollm2: LoadedModel
) -> None:
    await _assert_concurrent_greedy_matches(smol_engine, smollm2, new_tokens=12)


async def test_concurrent_greedy_equals_transformers_generate_tiny_moe(
    moe_engine: TorchEngine, tiny_moe: LoadedModel
) -> None:
    await _assert_concurrent_greedy_matches(moe_engine, tiny_moe, new_tokens=40)


async def test_requests_arriving_mid_decode_join_the_running_batch(
    moe_engine: TorchEngine, tiny_moe: LoadedModel
) -> None:
    first, late = prompts_of_mixed_lengths(tiny_moe)[1:3]
    seen_together = False
    late_task: asyncio.Task | None = None
    async for delta in moe_engine.stream(
        request("long", first, temperature=0.0, max_new_tokens=60, ignore_eos=True)
    ):
        if late_task is None and delta.token_ids and len(delta.token_ids) == 1:
            late_task = asyncio.create_task(
                moe_engine.generate(request("late", late, temperature=0.0, max_new_tokens=10))
            )
        seen_together |= moe_engine.stats().running == 2
    assert late_task is not None and late_task.done(), "the late request finished while the long one decoded"
    assert seen_together
    assert (await late_task).completions[0].token_ids == greedy_generate(tiny_moe, late, 10)


@pytest.mark.parametrize("model_name", ["tiny_moe", pytest.param("smollm2", marks=pytest.mark.slow)])
async def test_logprobs_equal_a_plain_forward_pass(
    model_name: str, request_fixture: pytest.FixtureRequest
) -> None:
    loaded: LoadedModel = request_fixture.getfixturevalue(model_name)
    prompts = prompts_of_mixed_lengths(loaded)[1:3]
    async for engine in _started(loaded):
        results = await asyncio.gather(
            *[
                engine.generate(
                    request(f"s{i}", p, temperature=0.8, top_k=50, seed=i, max_new_tokens=10, top_logprobs=3)
                )
                for i, p in enumerate(prompts)
            ]
        )
    for prompt, result in zip(prompts, results, strict=True):
        completion = result.completions[0]
        reference = forward_logprobs(loaded, prompt, completion.token_ids)
        expected = reference.gather(1, torch.tensor(completion.token_ids).unsqueeze(1)).squeeze(1)
        assert torch.allclose(torch.tensor(completion.logprobs), expected, atol=1e-4, rtol=0)
        assert completion.top_logprobs is not None
        for position, alternatives in enumerate(completion.top_logprobs):
            top = torch.topk(reference[position], 3)
            assert [token for token, _ in alternatives] == top.indices.tolist()
            assert torch.allclose(torch.tensor([lp for _, lp in alternatives]), top.values, atol=1e-4, rtol=0)


@pytest.fixture
def request_fixture(request: pytest.FixtureRequest) -> pytest.FixtureRequest:
    return request


async def test_a_shared_prefix_is_reused_and_changes_nothing(
    moe_engine: TorchEngine, tiny_moe: LoadedModel
) -> None:
    system = prompts_of_mixed_lengths(tiny_moe)[-1]
    tails = [
        tiny_moe.tokenizer(t, add_special_tokens=False)["input_ids"] for t in (" Question one?", " And two?")
    ]
    first = await moe_engine.generate(request("a", system + tails[0], temperature=0.0, max_new_tokens=8))
    hits_before = moe_engine.stats().prefix_cache_hit_tokens
    second = await moe_engine.generate(request("b", system + tails[1], temperature=0.0, max_new_tokens=8))
    assert moe_engine.stats().prefix_cache_hit_tokens - hits_before >= len(system) - 1
    assert first.completions[0].token_ids == greedy_generate(tiny_moe, system + tails[0], 8)
    assert second.completions[0].token_ids == greedy_generate(tiny_moe, system + tails[1], 8)


async def test_bad_requests_are_refused_with_a_reason(moe_engine: TorchEngine, tiny_moe: LoadedModel) -> None:
    with pytest.raises(EngineError, match="shorten the prompt"):
        await moe_engine.generate(request("long", [1] * tiny_moe.max_context))
    slow = asyncio.create_task(
        moe_engine.generate(request("dup", [1, 2, 3], max_new_tokens=50, ignore_eos=True))
    )
    await asyncio.sleep(0)
    with pytest.raises(EngineError, match="already running"):
        await moe_engine.generate(request("dup", [4, 5]))
    assert len((await slow).completions[0].token_ids) == 50
    async for small in _started(tiny_moe, TorchEngineConfig(max_batch_size=2)):
        with pytest.raises(EngineError, match="max_batch_size"):
            await small.generate(request("many", [1, 2], n=3))
    with pytest.raises(EngineError, match="start"):
        await TorchEngine(tiny_moe).generate(request("x", [1]))


async def test_rows_leaving_and_longer_rows_joining_keep_every_sequence_exact(tiny_moe: LoadedModel) -> None:
    """Short outputs leave early while longer prompts join later (the cache shifts, grows and trims)."""
    prompts = prompts_of_mixed_lengths(tiny_moe)
    lengths = [3, 25, 9, 17]
    async for engine in _started(tiny_moe, TorchEngineConfig(prefill_chunk_tokens=16)):
        tasks = []
        for i, (prompt, length) in enumerate(zip(prompts, lengths, strict=True)):
            tasks.append(
                asyncio.create_task(
                    engine.generate(
                        request(f"j{i}", prompt, temperature=0.0, max_new_tokens=length, ignore_eos=True)
                    )
                )
            )
            while engine.stats().generated_tokens < 2 * (i + 1):
                await asyncio.sleep(0.002)
        results = await asyncio.gather(*tasks)
    for prompt, length, result in zip(prompts, lengths, results, strict=True):
        assert result.completions[0].token_ids == greedy_generate(tiny_moe, prompt, length, ignore_eos=True)


async def test_rows_sharing_a_prompt_prefix_decode_against_one_copy_and_stay_exact(
    tiny_moe: LoadedModel,
) -> None:
    """Agent requests share a system prompt: the batch keeps it once, and shrinks it when a row differs."""
    system = prompts_of_mixed_lengths(tiny_moe)[-1]
    tails = [" Question one?", " And two?", " A third, longer question about the sea and the ships?"]
    prompts = [system + tiny_moe.tokenizer(t, add_special_tokens=False)["input_ids"] for t in tails]
    unrelated = prompts_of_mixed_lengths(tiny_moe)[1]
    shared_seen = 0
    async for engine in _started(tiny_moe, TorchEngineConfig(prefill_chunk_tokens=64, prefix_min_match=8)):
        first = [
            asyncio.create_task(
                engine.generate(request(f"p{i}", p, temperature=0.0, max_new_tokens=24, ignore_eos=True))
            )
            for i, p in enumerate(prompts)
        ]
        while engine.stats().running < len(prompts):
            await asyncio.sleep(0.002)
        shared_seen = engine.stats().shared_prefix_tokens
        late = await engine.generate(request("u", unrelated, temperature=0.0, max_new_tokens=6))
        results = await asyncio.gather(*first)
    assert shared_seen >= len(system) - 1
    for prompt, result in zip(prompts, results, strict=True):
        assert result.completions[0].token_ids == greedy_generate(tiny_moe, prompt, 24, ignore_eos=True)
        reference = forward_logprobs(tiny_moe, prompt, result.completions[0].token_ids)
        expected = reference.gather(1, torch.tensor(result.completions[0].token_ids).unsqueeze(1)).squeeze(1)
        assert torch.allclose(torch.tensor(result.completions[0].logprobs), expected, atol=1e-4, rtol=0)
    assert late.completions[0].token_ids == greedy_generate(tiny_moe, unrelated, 6)
