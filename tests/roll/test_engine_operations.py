"""The torch engine's operations: abort, weight updates, sleep/wake, seeded sampling, stops, streams."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import torch

from roll.engine.protocol import EngineError
from roll.engine.reference import greedy_generate
from roll.engine.torch_engine import TorchEngine, TorchEngineConfig
from roll.engine.types import GenerateRequest, SamplingParams
from roll.models import LoadedModel, load_model

PROMPT_TEXT = "Tell me a long story about a lighthouse keeper and the sea."


def request(request_id: str, prompt: list[int], **params: object) -> GenerateRequest:
    return GenerateRequest(request_id=request_id, prompt_token_ids=prompt, params=SamplingParams(**params))


@pytest.fixture
def prompt(tiny_moe: LoadedModel) -> list[int]:
    return tiny_moe.tokenizer(PROMPT_TEXT, add_special_tokens=False)["input_ids"]


@pytest.fixture
async def engine(tiny_moe: LoadedModel) -> AsyncIterator[TorchEngine]:
    engine = TorchEngine(tiny_moe, TorchEngineConfig())
    await engine.start()
    yield engine
    await engine.shutdown()


@pytest.fixture
def own_moe() -> LoadedModel:
    """A private copy of the tiny MoE, for tests that change or offload its weights."""
    return load_model("builtin:tiny-qwen3-moe")


@pytest.fixture
async def own_engine(own_moe: LoadedModel) -> AsyncIterator[TorchEngine]:
    engine = TorchEngine(own_moe, TorchEngineConfig())
    await engine.start()
    yield engine
    await engine.shutdown()


async def test_abort_stops_a_running_request(engine: TorchEngine, prompt: list[int]) -> None:
    stream = engine.stream(request("endless", prompt, max_new_tokens=2000, ignore_eos=True))
    received = 0
    async for delta in stream:
        received += len(delta.token_ids)
        if received == 3:
            await engine.abort("endless")
        if delta.finish_reason is not None:
            assert delta.finish_reason == "abort"
    assert 3 <= received < 2000
    assert engine.stats().running == 0

    task = asyncio.create_task(engine.generate(request("gen", prompt, max_new_tokens=2000, ignore_eos=True)))
    while engine.stats().generated_tokens < received + 2:
        await asyncio.sleep(0.01)
    await engine.abort("gen")
    result = await task
    assert result.completions[0].finish_reason == "abort"
    assert 0 < len(result.completions[0].token_ids) < 2000


async def test_weight_update_changes_outputs_and_the_reported_version(
    own_engine: TorchEngine, own_moe: LoadedModel, prompt: list[int], tmp_path: Path
) -> None:
    model = own_moe.model
    greedy = {"temperature": 0.0, "max_new_tokens": 12, "ignore_eos": True}
    before = await own_engine.generate(request("v0", prompt, **greedy))
    assert before.weight_version == 0

    name = "lm_head.weight"
    changed = {name: model.get_parameter(name).detach() + 0.5 * torch.randn_like(model.get_parameter(name))}
    await own_engine.update_weights(changed, version=1)
    after = await own_engine.generate(request("v1", prompt, **greedy))
    assert after.weight_version == 1 and own_engine.weight_version == 1
    assert after.completions[0].token_ids != before.completions[0].token_ids
    assert after.completions[0].token_ids == greedy_generate(own_moe, prompt, 12, ignore_eos=True)

    model.save_pretrained(tmp_path / "v1")
    with torch.no_grad():
        model.get_parameter(name).zero_()
    await own_engine.update_weights(tmp_path / "v1", version=2)
    again = await own_engine.generate(request("v2", prompt, **greedy))
    assert again.weight_version == 2
    assert again.completions[0].token_ids == after.completions[0].token_ids

    with pytest.raises(EngineError, match="not in the model"):
        await own_engine.update_weights({"no.such.weight": torch.zeros(1)}, version=3)
    with pytest.raises(EngineError, match="not a model folder"):
        await own_engine.update_weights(tmp_path, version=3)
    assert own_engine.weight_version == 2


async def test_sleep_releases_memory_and_wake_restores_the_same_outputs(
    own_engine: TorchEngine, own_moe: LoadedModel, prompt: list[int]
) -> None:
    greedy = {"temperature": 0.0, "max_new_tokens": 30, "ignore_eos": True}
    before = await own_engine.generate(request("before", prompt, **greedy))
    in_flight = asyncio.create_task(own_engine.generate(request("in-flight", prompt, **greedy)))
    while own_engine.stats().generated_tokens < 30 + 5:
        await asyncio.sleep(0.005)
    await own_engine.sleep()
    stats = own_engine.stats()
    assert stats.sleeping and stats.kv_cache_bytes == 0 and stats.waiting == 1
    assert all(p.numel() == 0 for p in own_moe.model.parameters())
    queued = asyncio.create_task(own_engine.generate(request("queued", prompt, **greedy)))
    await asyncio.sleep(0.05)
    assert not in_flight.done() and not queued.done()

    await own_engine.wake()
    assert not own_engine.stats().sleeping
    for result in (
        await in_flight,
        await queued,
        await own_engine.generate(request("after", prompt, **greedy)),
    ):
        assert result.completions[0].token_ids == before.completions[0].token_ids


async def test_seeded_sampling_is_reproducible(engine: TorchEngine, prompt: list[int]) -> None:
    sampled = {"temperature": 1.0, "top_p": 0.9, "top_k": 40, "max_new_tokens": 16, "ignore_eos": True}
    first, second, other = await asyncio.gather(
        engine.generate(request("a", prompt, seed=7, n=3, **sampled)),
        engine.generate(request("b", prompt, seed=7, n=3, **sampled)),
        engine.generate(request("c", prompt, seed=8, n=3, **sampled)),
    )
    tokens = [[c.token_ids for c in r.completions] for r in (first, second, other)]
    assert tokens[0] == tokens[1]
    assert tokens[0] != tokens[2]
    assert len({tuple(t) for t in tokens[0]}) == 3, "the n completions of one request differ"
    alone = await engine.generate(request("d", prompt, seed=7, n=3, **sampled))
    assert [c.token_ids for c in alone.completions] == tokens[0]


async def test_top_k_one_is_greedy(engine: TorchEngine, prompt: list[int]) -> None:
    greedy = await engine.generate(request("g", prompt, temperature=0.0, max_new_tokens=10, ignore_eos=True))
    top1 = await engine.generate(
        request("k", prompt, temperature=1.5, top_k=1, seed=3, max_new_tokens=10, ignore_eos=True)
    )
    assert top1.completions[0].token_ids == greedy.completions[0].token_ids


async def test_stop_strings_and_stop_tokens_end_a_completion(engine: TorchEngine, prompt: list[int]) -> None:
    greedy = {"temperature": 0.0, "max_new_tokens": 30, "ignore_eos": True}
    full = (await engine.generate(request("full", prompt, **greedy))).completions[0]
    assert full.finish_reason == "length" and len(full.token_ids) == 30
    stop = full.text[len(full.text) // 2 : len(full.text) // 2 + 4]
    cut = (await engine.generate(request("cut", prompt, stop=[stop], **greedy))).completions[0]
    assert cut.finish_reason == "stop"
    assert cut.text == full.text[: full.text.index(stop)]
    assert cut.token_ids == full.token_ids[: len(cut.token_ids)] and len(cut.token_ids) < 30

    stop_token = full.token_ids[10]
    by_token = (
        await engine.generate(request("tok", prompt, stop_token_ids=[stop_token], **greedy))
    ).completions[0]
    assert by_token.finish_reason == "stop"
    assert by_token.token_ids == full.token_ids[: full.token_ids.index(stop_token) + 1]


async def test_stream_deltas_add_up_to_the_result(engine: TorchEngine, prompt: list[int]) -> None:
    params = {"temperature": 0.7, "seed": 1, "max_new_tokens": 25, "n": 2, "top_logprobs": 2, "stop": ["e t"]}
    whole = await engine.generate(request("whole", prompt, **params))
    texts, tokens, finish = ["", ""], [[], []], [None, None]
    async for delta in engine.stream(request("streamed", prompt, **params)):
        texts[delta.index] += delta.text
        tokens[delta.index] += delta.token_ids
        assert delta.top_logprobs is not None and all(len(a) == 2 for a in delta.top_logprobs)
        assert finish[delta.index] is None, "nothing follows a finished completion"
        finish[delta.index] = delta.finish_reason
    for index, completion in enumerate(whole.completions):
        assert texts[index] == completion.text and "e t" not in completion.text
        assert tokens[index] == completion.token_ids
        assert finish[index] == completion.finish_reason
    assert engine.stats().requests_finished == 2
