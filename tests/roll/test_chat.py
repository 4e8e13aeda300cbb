"""Chat templating with tools: rendering in the model's template, and tool calls parsed back out."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import torch

from roll.models import (
    ChatTemplateError,
    LoadedModel,
    chat_stop_token_ids,
    parse_assistant_output,
    render_chat,
)

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
TIME_TOOL = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}


def test_without_tools_the_model_template_renders_unchanged(smollm2: LoadedModel) -> None:
    tok = smollm2.tokenizer
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]
    prompt = render_chat(tok, messages)
    expected = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert prompt.text == expected
    assert prompt.token_ids == tok(expected, add_special_tokens=False).input_ids
    assert prompt.text.endswith("<|im_start|>assistant\n")
    assert not prompt.parse_tool_calls
    assert tok.decode(prompt.token_ids) == prompt.text
    vocab = tok.get_vocab()
    assert chat_stop_token_ids(tok) == sorted({vocab["<|im_end|>"], vocab["<|endoftext|>"], tok.eos_token_id})


def test_tools_and_tool_turns_render_into_a_template_without_tool_support(smollm2: LoadedModel) -> None:
    messages = [
        {"role": "developer", "content": "You check facts."},
        {
            "role": "user",
            "content": [{"type": "text", "text": "Weather in Paris "}, {"type": "text", "text": "?"}],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                },
                {"id": "c2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "c2", "content": "noon"},
    ]
    prompt = render_chat(smollm2.tokenizer, messages, [WEATHER_TOOL, TIME_TOOL])
    assert prompt.text.startswith("<|im_start|>system\nYou check facts.\n\n# Tools\n")
    assert json.dumps(WEATHER_TOOL) in prompt.text
    assert "<|im_start|>user\nWeather in Paris ?<|im_end|>" in prompt.text
    assert (
        '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}'
        "\n</tool_call>\n"
        '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call><|im_end|>'
    ) in prompt.text
    assert (
        "<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<tool_response>\nnoon\n</tool_response><|im_end|>"
    ) in prompt.text
    assert prompt.text.endswith("<|im_start|>assistant\n")
    assert prompt.parse_tool_calls and prompt.forced_prefix == ""


def test_rendered_tool_call_parses_back_to_the_same_call(smollm2: LoadedModel) -> None:
    tok = smollm2.tokenizer
    call = {"name": "get_weather", "arguments": {"city": "Zürich"}}
    history = [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [{"function": call}]},
    ]
    rendered = render_chat(tok, history, [WEATHER_TOOL]).text
    answer = rendered[rendered.index("<|im_start|>assistant\n") + len("<|im_start|>assistant\n") :]
    answer = answer[: answer.index("<|im_end|>")]
    ids = tok(answer, add_special_tokens=False).input_ids

    parsed = parse_assistant_output(tok.decode(ids), ids)
    assert parsed.content == "Let me check."
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in parsed.tool_calls] == [
        ("get_weather", call["arguments"])
    ]
    assert parsed.token_ids == ids
    message = parsed.to_openai_message()
    assert message["tool_calls"][0]["type"] == "function"
    assert message["tool_calls"][0]["id"].startswith("call_")


@pytest.mark.parametrize(
    ("text", "content", "calls"),
    [
        ("plain answer", "plain answer", []),
        (
            'a<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>b'
            '<tool_call>\n{"name": "g", "arguments": "{\\"y\\": [2]}"}\n</tool_call>',
            "ab",
            [("f", {"x": 1}), ("g", {"y": [2]})],
        ),
        ('<tool_call>\n{"name": "f", "arguments": {}}', None, [("f", {})]),
        (
            '<tool_call>{"name": "f", "arguments": {"x": 1</tool_call>',
            '<tool_call>{"name": "f", "arguments": {"x": 1</tool_call>',
            [],
        ),
        ("<tool_call>[1, 2]</tool_call> ok", "<tool_call>[1, 2]</tool_call> ok", []),
        (
            '<tool_call>{"name": "f", "arguments": [1]}</tool_call>',
            '<tool_call>{"name": "f", "arguments": [1]}</tool_call>',
            [],
        ),
    ],
)
def test_parse_fixed_outputs(text: str, content: str | None, calls: list[tuple[str, Any]]) -> None:
    parsed = parse_assistant_output(text, [7, 8])
    assert parsed.content == content
    assert [
        (c["function"]["name"], json.loads(c["function"]["arguments"])) for c in parsed.tool_calls
    ] == calls
    assert parsed.token_ids == [7, 8]


def test_named_tool_choice_forces_the_call_and_parses_its_arguments(smollm2: LoadedModel) -> None:
    named = {"type": "function", "function": {"name": "get_time"}}
    prompt = render_chat(
        smollm2.tokenizer, [{"role": "user", "content": "Time?"}], [WEATHER_TOOL, TIME_TOOL], named
    )
    assert prompt.forced_tool == "get_time"
    assert prompt.stop == ["</tool_call>"]
    assert prompt.text.endswith('<|im_start|>assistant\n<tool_call>\n{"name": "get_time", "arguments": ')
    parsed = prompt.parse_output(' {"tz": "UTC"}}\n</tool_call> done', [5])
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in parsed.tool_calls] == [
        ("get_time", {"tz": "UTC"})
    ]
    assert parsed.content == "done"
    unparsable = prompt.parse_output("not json", [5])
    assert unparsable.tool_calls == []
    assert unparsable.content == prompt.forced_prefix + "not json"


def test_required_and_none_tool_choices(smollm2: LoadedModel) -> None:
    tok = smollm2.tokenizer
    user = [{"role": "user", "content": "Hi"}]
    single = render_chat(tok, user, [WEATHER_TOOL], "required")
    assert single.forced_tool == "get_weather"
    several = render_chat(tok, user, [WEATHER_TOOL, TIME_TOOL], "required")
    assert several.forced_tool is None
    assert several.text.endswith('<tool_call>\n{"name": "')
    assert several.stop == ["</tool_call>"]
    parsed = several.parse_output('get_time", "arguments": {}}\n</tool_call>', [1])
    assert [c["function"]["name"] for c in parsed.tool_calls] == ["get_time"]
    none = render_chat(tok, user, [WEATHER_TOOL], "none")
    assert none.text == render_chat(tok, user).text
    assert none.parse_output("<tool_call>{}</tool_call>", [1]).content == "<tool_call>{}</tool_call>"


def test_a_template_with_native_tool_support_gets_the_tools(smollm2: LoadedModel) -> None:
    tok = copy.deepcopy(smollm2.tokenizer)
    tok.chat_template = (
        "{% for t in tools or [] %}[tool {{ t.function.name }}]{% endfor %}"
        "{% for m in messages %}<{{ m.role }}>{{ m.content }}"
        "{% for c in m.tool_calls or [] %}(call {{ c.function.name }} {{ c.function.arguments.city }})"
        "{% endfor %}"
        "{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}"
    )
    messages = [
        {"role": "user", "content": "Paris?"},
        {
            "role": "assistant",
            "tool_calls": [{"function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}],
        },
        {"role": "tool", "tool_call_id": "x", "content": "sunny"},
    ]
    prompt = render_chat(tok, messages, [WEATHER_TOOL])
    assert (
        prompt.text
        == "[tool get_weather]<user>Paris?<assistant>(call get_weather Paris)<tool>sunny<assistant>"
    )


@pytest.mark.parametrize(
    ("messages", "tools", "tool_choice", "error"),
    [
        ([], None, "auto", "at least one message"),
        ([{"role": "robot", "content": "x"}], None, "auto", "role 'robot'"),
        ([{"content": "x"}], None, "auto", "needs a string 'role'"),
        ([{"role": "user", "content": [{"type": "image_url"}]}], None, "auto", "only text parts"),
        (
            [{"role": "user", "content": "x"}],
            [{"type": "function"}],
            "auto",
            r"tools\[0\] is not a valid tool",
        ),
        (
            [{"role": "user", "content": "x"}],
            [{"type": "function", "function": {"name": "a b"}}],
            "auto",
            "tools",
        ),
        ([{"role": "user", "content": "x"}], [TIME_TOOL, TIME_TOOL], "auto", "unique"),
        ([{"role": "user", "content": "x"}], None, "required", "needs at least one tool"),
        ([{"role": "user", "content": "x"}], [TIME_TOOL], "sometimes", "not one of"),
        (
            [{"role": "user", "content": "x"}],
            [TIME_TOOL],
            {"type": "function", "function": {"name": "get_weather"}},
            "not among the tools",
        ),
        (
            [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{oops"}}]}],
            None,
            "auto",
            "not JSON",
        ),
    ],
)
def test_bad_messages_and_tools_are_clear_errors(
    smollm2: LoadedModel, messages: list[Any], tools: list[Any] | None, tool_choice: Any, error: str
) -> None:
    with pytest.raises(ChatTemplateError, match=error):
        render_chat(smollm2.tokenizer, messages, tools, tool_choice)


@pytest.mark.slow
def test_forced_tool_call_parses_real_generated_text(smollm2: LoadedModel) -> None:
    tok = smollm2.tokenizer
    named = {"type": "function", "function": {"name": "get_weather"}}
    messages = [{"role": "user", "content": "What is the weather like in Paris today?"}]
    prompt = render_chat(tok, messages, [WEATHER_TOOL], named)
    out = smollm2.model.generate(
        torch.tensor([prompt.token_ids]),
        max_new_tokens=40,
        do_sample=False,
        eos_token_id=chat_stop_token_ids(tok),
        stop_strings=prompt.stop,
        tokenizer=tok,
    )
    generated = out[0, len(prompt.token_ids) :].tolist()
    parsed = prompt.parse_output(tok.decode(generated, skip_special_tokens=True), generated)
    assert [call["function"]["name"] for call in parsed.tool_calls] == ["get_weather"]
    assert isinstance(json.loads(parsed.tool_calls[0]["function"]["arguments"]), dict)
    assert parsed.token_ids == generated
