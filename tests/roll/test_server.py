"""The official `openai` client against `roll serve` (real TorchEngine, real models, HTTP on loopback)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import openai
import pytest
import torch

from roll.models import LoadedModel, chat_stop_token_ids, render_chat

CAPITAL = [{"role": "user", "content": "What is the capital of France?"}]
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
TOOL_QUESTION = [{"role": "user", "content": "What is the weather like in Paris today?"}]
FORCE_WEATHER = {"type": "function", "function": {"name": "get_weather"}}
TINY = "builtin:tiny-qwen3-moe"
SMOL = "builtin:smollm2-135m-instruct"


def client(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=120)


def hf_greedy(loaded: LoadedModel, prompt_ids: list[int], max_new_tokens: int) -> list[int]:
    out = loaded.model.generate(
        torch.tensor([prompt_ids]),
        max_new_tokens=max_new_tokens,
        do_sample=False,
        eos_token_id=chat_stop_token_ids(loaded.tokenizer),
    )
    return out[0, len(prompt_ids) :].tolist()


def test_models_lists_the_served_model(tiny_moe_server: str) -> None:
    api = client(tiny_moe_server)
    assert [model.id for model in api.models.list().data] == [TINY]
    assert api.models.retrieve(TINY).id == TINY
    with pytest.raises(openai.NotFoundError) as missing:
        api.models.retrieve("gpt-4o")
    assert missing.value.code == "model_not_found"


@pytest.mark.slow
def test_plain_chat_matches_the_model_token_for_token(smollm2: LoadedModel, smollm2_server: str) -> None:
    response = client(smollm2_server).chat.completions.create(
        model=SMOL, messages=CAPITAL, temperature=0, max_tokens=20, extra_body={"return_token_ids": True}
    )
    choice = response.choices[0]
    assert "Paris" in choice.message.content
    assert choice.message.role == "assistant"
    assert choice.finish_reason == "stop"
    prompt_ids = render_chat(smollm2.tokenizer, CAPITAL).token_ids
    assert response.prompt_token_ids == prompt_ids
    assert choice.token_ids == hf_greedy(smollm2, prompt_ids, 20)
    assert response.usage.prompt_tokens == len(prompt_ids)
    assert response.usage.completion_tokens == len(choice.token_ids)
    assert response.weight_version == 0


@pytest.mark.slow
def test_streaming_chat_equals_the_non_streaming_answer(smollm2_server: str) -> None:
    api = client(smollm2_server)
    whole = api.chat.completions.create(
        model=SMOL, messages=CAPITAL, temperature=0, max_tokens=20, extra_body={"return_token_ids": True}
    )
    chunks = list(
        api.chat.completions.create(
            model=SMOL,
            messages=CAPITAL,
            temperature=0,
            max_tokens=20,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"return_token_ids": True},
        )
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[0].prompt_token_ids == whole.prompt_token_ids
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    token_ids = [t for c in chunks if c.choices for t in c.choices[0].token_ids or []]
    assert text == whole.choices[0].message.content
    assert token_ids == whole.choices[0].token_ids
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"]
    assert chunks[-1].choices == []
    assert chunks[-1].usage.completion_tokens == len(token_ids)


@pytest.mark.slow
def test_stop_strings_end_the_answer_before_them(smollm2_server: str) -> None:
    response = client(smollm2_server).chat.completions.create(
        model=SMOL, messages=CAPITAL, temperature=0, max_tokens=20, stop=["Paris"]
    )
    assert response.choices[0].finish_reason == "stop"
    assert "Paris" not in response.choices[0].message.content
    assert response.choices[0].message.content.startswith("The capital of France")


@pytest.mark.slow
def test_forced_tool_call_comes_back_as_openai_tool_calls(smollm2_server: str) -> None:
    api = client(smollm2_server)
    response = api.chat.completions.create(
        model=SMOL,
        messages=TOOL_QUESTION,
        tools=[WEATHER_TOOL],
        tool_choice=FORCE_WEATHER,
        temperature=0,
        max_tokens=40,
    )
    choice = response.choices[0]
    assert choice.finish_reason == "tool_calls"
    [call] = choice.message.tool_calls
    assert call.type == "function"
    assert call.function.name == "get_weather"
    assert isinstance(json.loads(call.function.arguments), dict)
    assert call.id.startswith("call_")

    streamed = list(
        api.chat.completions.create(
            model=SMOL,
            messages=TOOL_QUESTION,
            tools=[WEATHER_TOOL],
            tool_choice=FORCE_WEATHER,
            temperature=0,
            max_tokens=40,
            stream=True,
        )
    )
    calls = [tc for c in streamed for tc in c.choices[0].delta.tool_calls or []]
    assert [(tc.function.name, tc.function.arguments) for tc in calls] == [
        ("get_weather", call.function.arguments)
    ]
    assert streamed[-1].choices[0].finish_reason == "tool_calls"
    streamed_content = "".join(c.choices[0].delta.content or "" for c in streamed)
    assert streamed_content == (choice.message.content or "")


@pytest.mark.slow
def test_a_tool_result_turn_renders_and_answers(smollm2_server: str) -> None:
    messages: list[Any] = [
        *TOOL_QUESTION,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 24 degrees"},
    ]
    response = client(smollm2_server).chat.completions.create(
        model=SMOL, messages=messages, tools=[WEATHER_TOOL], temperature=0, max_tokens=12
    )
    assert response.choices[0].finish_reason in ("stop", "length", "tool_calls")
    assert response.usage.prompt_tokens > 100


def test_logprobs_equal_a_forward_pass(tiny_moe: LoadedModel, tiny_moe_server: str) -> None:
    messages = [{"role": "user", "content": "Count: one, two,"}]
    response = client(tiny_moe_server).chat.completions.create(
        model=TINY,
        messages=messages,
        temperature=0,
        max_tokens=6,
        logprobs=True,
        top_logprobs=3,
        extra_body={"return_token_ids": True},
    )
    choice = response.choices[0]
    content = choice.logprobs.content
    assert len(content) == len(choice.token_ids) == 6
    assert [entry.logprob for entry in content] == choice.token_logprobs
    tok = tiny_moe.tokenizer
    for entry, token_id in zip(content, choice.token_ids, strict=True):
        assert entry.token == tok.decode([token_id])
        assert len(entry.top_logprobs) == 3
        assert entry.top_logprobs[0].token == entry.token  # greedy picks the most likely token
        assert [alt.logprob for alt in entry.top_logprobs] == sorted(
            (alt.logprob for alt in entry.top_logprobs), reverse=True
        )

    ids = torch.tensor([response.prompt_token_ids + choice.token_ids])
    with torch.no_grad():
        logits = tiny_moe.model(ids).logits[0].float()
    logprobs = torch.log_softmax(logits, dim=-1)
    start = len(response.prompt_token_ids)
    expected = [logprobs[start - 1 + i, t].item() for i, t in enumerate(choice.token_ids)]
    assert choice.token_logprobs == pytest.approx(expected, abs=1e-4)


def test_seeded_sampling_repeats_and_n_gives_several_choices(tiny_moe_server: str) -> None:
    api = client(tiny_moe_server)

    def sample(seed: int) -> list[list[int]]:
        response = api.chat.completions.create(
            model=TINY,
            messages=CAPITAL,
            temperature=1.0,
            top_p=0.9,
            n=3,
            seed=seed,
            max_tokens=8,
            extra_body={"return_token_ids": True},
        )
        assert [c.index for c in response.choices] == [0, 1, 2]
        assert response.usage.completion_tokens == sum(len(c.token_ids) for c in response.choices)
        return [c.token_ids for c in response.choices]

    first = sample(7)
    assert sample(7) == first
    assert len({tuple(ids) for ids in first}) > 1
    assert sample(8) != first


def test_text_completions_take_text_or_token_ids(tiny_moe: LoadedModel, tiny_moe_server: str) -> None:
    api = client(tiny_moe_server)
    text = api.completions.create(
        model=TINY,
        prompt="Once upon a time",
        max_tokens=5,
        temperature=0,
        logprobs=2,
        extra_body={"return_token_ids": True},
    )
    prompt_ids = tiny_moe.tokenizer("Once upon a time").input_ids
    choice = text.choices[0]
    assert choice.prompt_token_ids == prompt_ids
    assert len(choice.token_ids) == 5 and choice.finish_reason == "length"
    assert choice.logprobs.token_logprobs == choice.token_logprobs
    assert choice.text == "".join(choice.logprobs.tokens)

    by_ids = api.completions.create(model=TINY, prompt=prompt_ids, max_tokens=5, temperature=0)
    assert by_ids.choices[0].text == choice.text

    streamed = list(
        api.completions.create(model=TINY, prompt=prompt_ids, max_tokens=5, temperature=0, stream=True)
    )
    assert "".join(c.choices[0].text for c in streamed) == choice.text
    assert streamed[-1].choices[0].finish_reason == "length"


@pytest.mark.parametrize(
    ("kwargs", "status", "code_or_param"),
    [
        ({"model": "gpt-4o"}, 404, "model_not_found"),
        ({"messages": [{"role": "user", "content": "word " * 5000}]}, 400, "context_length_exceeded"),
        ({"max_tokens": 5000}, 400, "context_length_exceeded"),
        ({"tools": [{"type": "function", "function": {"description": "no name"}}]}, 400, "tools"),
        (
            {"tools": [WEATHER_TOOL], "tool_choice": {"type": "function", "function": {"name": "nope"}}},
            400,
            "tool_choice",
        ),
        ({"tool_choice": "required"}, 400, "tool_choice"),
        ({"messages": [{"role": "wizard", "content": "hi"}]}, 400, "messages"),
        ({"temperature": 5}, 400, "temperature"),
        ({"n": 0}, 400, "n"),
        ({"top_logprobs": 3}, 400, None),
        ({"extra_body": {"best_answer": True}}, 400, "best_answer"),
        ({"frequency_penalty": 0.5}, 400, None),
    ],
)
def test_bad_requests_get_openai_error_bodies(
    tiny_moe_server: str, kwargs: dict[str, Any], status: int, code_or_param: str | None
) -> None:
    request: dict[str, Any] = {"model": TINY, "messages": CAPITAL, "max_tokens": 2, **kwargs}
    with pytest.raises(openai.APIStatusError) as raised:
        client(tiny_moe_server).chat.completions.create(**request)
    error = raised.value
    assert error.status_code == status
    body = error.body
    assert isinstance(body, dict) and body["message"]
    assert body["type"] == "invalid_request_error"
    if code_or_param:
        assert code_or_param in (body["code"], body["param"])


def test_openai_bookkeeping_fields_are_accepted(tiny_moe_server: str) -> None:
    response = client(tiny_moe_server).chat.completions.create(
        model=TINY,
        messages=CAPITAL,
        max_completion_tokens=3,
        store=False,
        metadata={"run": "eval"},
        service_tier="auto",
        prompt_cache_key="agent-1",
        safety_identifier="user-1",
        user="user-1",
    )
    assert response.usage is not None and response.usage.completion_tokens <= 3


def test_malformed_json_is_a_400(tiny_moe_server: str) -> None:
    response = httpx.post(
        f"{tiny_moe_server}/chat/completions",
        content=b"{not json",
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "The request body is not valid JSON."


def test_health_and_metrics(tiny_moe_server: str) -> None:
    client(tiny_moe_server).chat.completions.create(model=TINY, messages=CAPITAL, max_tokens=2)
    root = tiny_moe_server.removesuffix("/v1")
    health = httpx.get(f"{root}/health").json()
    assert health["status"] == "ok" and health["model"] == TINY
    metrics = httpx.get(f"{root}/metrics").text
    assert 'roll_server_requests_total{endpoint="/v1/chat/completions",status="200"}' in metrics
    assert "roll_engine_generated_tokens" in metrics
    assert "roll_server_time_to_first_token_seconds_count" in metrics


async def test_concurrent_chats_each_match_the_model_alone(
    tiny_moe: LoadedModel, tiny_moe_server: str
) -> None:
    api = openai.AsyncOpenAI(base_url=tiny_moe_server, api_key="unused", max_retries=0, timeout=120)
    questions = [
        "Hi",
        "Tell me a story about a dragon and a knight.",
        "2+2?",
        "Name three colours " * 6,
        "Why?",
        "Ok",
    ]
    limits = [8, 3, 6, 5, 8, 1]
    responses = await asyncio.gather(
        *(
            api.chat.completions.create(
                model=TINY,
                messages=[{"role": "user", "content": question}],
                temperature=0,
                max_tokens=limit,
                extra_body={"return_token_ids": True},
            )
            for question, limit in zip(questions, limits, strict=True)
        )
    )
    await api.close()
    for response, limit in zip(responses, limits, strict=True):
        choice = response.choices[0]
        assert choice.token_ids == hf_greedy(tiny_moe, response.prompt_token_ids, limit)


def test_text_completions_batch_prompts_and_n(tiny_moe_server: str) -> None:
    response = client(tiny_moe_server).completions.create(
        model=TINY,
        prompt=["The sky is", "Water is"],
        n=2,
        max_tokens=3,
        temperature=0,
        extra_body={"return_token_ids": True},
    )
    choices = response.choices
    assert [c.index for c in choices] == [0, 1, 2, 3]
    assert choices[0].token_ids == choices[1].token_ids  # greedy: both samples of a prompt agree
    assert choices[2].token_ids == choices[3].token_ids
    assert choices[0].prompt_token_ids != choices[2].prompt_token_ids
    assert response.usage.completion_tokens == sum(len(c.token_ids) for c in choices)
    assert all((c.finish_reason == "length") == (len(c.token_ids) == 3) for c in choices)
