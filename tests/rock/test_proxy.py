"""ModelProxyService on loopback: train mode against a real `roll serve` (tiny Qwen3-MoE), deploy and replay
against the scripted OpenAI server (a test double for the model's choices), and a sandbox's unix socket."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from iflow.context import CharEstimateCounter, apply_summary, prepare
from iflow.testing import ScriptedOpenAIServer, call, error, say
from iflow.types import ContextConfig
from rock.fleet import short_tmp
from rock.proxy import ProxyClient, ProxyConfig
from rock.proxy.server import ProxyThread
from rock.proxy.train import Sampling

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "run_shell_command",
            "description": "Run a shell command.",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
]
GREEDY = {"temperature": 0, "max_tokens": 6, "seed": 1}


@pytest.fixture(scope="module")
def engine(tiny_moe_loaded: Any) -> Iterator[str]:
    """`roll serve` (TorchEngine + OpenAI app) for the tiny model on a free loopback port."""
    import socket
    import threading
    import time

    import uvicorn

    from roll.engine.server import create_app
    from roll.engine.torch_engine import TorchEngine

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    app = create_app(TorchEngine(tiny_moe_loaded), tiny_moe_loaded)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=5))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the engine server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    server.should_exit = True
    thread.join(timeout=30)
    sock.close()


@pytest.fixture(scope="module")
def tiny_moe_loaded() -> Any:
    from roll.models import load_model

    return load_model("builtin:tiny-qwen3-moe")


@pytest.fixture(scope="module")
def train_proxy(engine: str) -> Iterator[ProxyThread]:
    with ProxyThread(ProxyConfig(mode="train", upstream_url=engine)) as proxy:
        yield proxy


def history(turns: int, distinct: bool = False) -> list[dict[str, Any]]:
    """`turns` read-only calls and their results: identical ones (what the light pass drops) or `distinct`."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a terminal agent."},
        {"role": "user", "content": "Look at the notes."},
    ]
    for k in range(turns):
        arguments = json.dumps({"absolute_path": f"/work/notes{k if distinct else ''}.txt"})
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": f"c{k}",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": arguments},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"c{k}", "content": "notes: " + "lorem ipsum " * 40})
    return messages


def engine_direct(engine: str, messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    body = {"model": "builtin:tiny-qwen3-moe", "messages": messages, "return_token_ids": True, **extra}
    response = httpx.post(f"{engine}/chat/completions", json=body, timeout=120)
    response.raise_for_status()
    return response.json()


def test_train_records_the_engines_token_ids(train_proxy: ProxyThread, engine: str, tiny_moe_loaded: Any):
    from roll.models import render_chat

    client = ProxyClient(train_proxy.url)
    episode = client.open_episode()
    messages = [{"role": "user", "content": "List the files in /tmp."}]
    agent = openai.OpenAI(base_url=client.episode_url(episode), api_key="unused")
    answer = agent.chat.completions.create(model="any", messages=messages, tools=TOOLS, **GREEDY)
    record = client.end_episode(episode)

    assert len(record.chunks) == 1 and record.ended
    recorded = record.chunks[0]
    direct = engine_direct(engine, messages, tools=TOOLS, **GREEDY)
    assert recorded.chunk.output_ids == direct["choices"][0]["token_ids"]
    assert recorded.chunk.output_logprobs == pytest.approx(direct["choices"][0]["token_logprobs"], abs=1e-5)
    assert recorded.chunk.context_ids == direct["prompt_token_ids"]
    assert (
        recorded.chunk.context_ids
        == render_chat(tiny_moe_loaded.tokenizer, messages, TOOLS, "auto").token_ids
    )
    assert recorded.chunk.weight_version == direct["weight_version"]
    assert answer.choices[0].message.content == direct["choices"][0]["message"]["content"]
    assert "token_ids" not in answer.choices[0].model_dump() and recorded.latency_s > 0


def test_train_sends_iflows_context_after_the_light_pass(train_proxy: ProxyThread, engine: str):
    context = {"contextWindow": 1000, "lightThreshold": 0.5, "summaryThreshold": 1.0, "keepRecentMessages": 2}
    client = ProxyClient(train_proxy.url)
    episode = client.open_episode(context=context)
    sent = history(6)
    agent = openai.OpenAI(base_url=client.episode_url(episode), api_key="unused")
    agent.chat.completions.create(model="any", messages=sent, **GREEDY)
    recorded = client.end_episode(episode).chunks[0]

    expected = prepare(sent, None, ContextConfig.model_validate(context), counter=CharEstimateCounter())
    assert expected.compression.tier == "light" and len(expected.messages) < len(sent)
    assert recorded.messages == expected.messages
    assert (
        recorded.chunk.context_ids == engine_direct(engine, expected.messages, **GREEDY)["prompt_token_ids"]
    )


def test_train_summarizes_like_iflow_when_the_history_is_too_long(train_proxy: ProxyThread, engine: str):
    context = {"contextWindow": 1000, "lightThreshold": 0.5, "summaryThreshold": 0.5, "keepRecentMessages": 2}
    config = ContextConfig.model_validate(context)
    client = ProxyClient(train_proxy.url)
    episode = client.open_episode(context=context)
    sent = history(6, distinct=True)
    agent = openai.OpenAI(base_url=client.episode_url(episode), api_key="unused")
    agent.chat.completions.create(model="any", messages=sent, **GREEDY)
    recorded = client.end_episode(episode).chunks[0]

    request = prepare(sent, None, config, counter=CharEstimateCounter()).summary_request
    assert request is not None
    summary = engine_direct(engine, list(request.messages), **GREEDY)["choices"][0]["message"]["content"]
    expected, _ = apply_summary(request, summary, config, CharEstimateCounter())
    assert recorded.summarized and recorded.messages == expected
    assert len(recorded.messages) < len(sent)


def test_train_streams_the_recorded_answer(train_proxy: ProxyThread):
    client = ProxyClient(train_proxy.url)
    episode = client.open_episode()
    agent = openai.OpenAI(base_url=client.episode_url(episode), api_key="unused")
    messages = [{"role": "user", "content": "Say hello."}]
    whole = agent.chat.completions.create(model="any", messages=messages, **GREEDY)
    following = [*messages, {"role": "assistant", "content": whole.choices[0].message.content}]
    following.append({"role": "user", "content": "Again."})
    streamed = agent.chat.completions.create(model="any", messages=following, stream=True, **GREEDY)
    text = "".join(part.choices[0].delta.content or "" for part in streamed if part.choices)
    chunks = client.end_episode(episode).chunks
    assert len(chunks) == 2 and text == chunks[1].answer["content"]


def test_train_records_only_calls_that_continue_the_episode(engine: str):
    """Sandbox code calling the chat route with its own messages adds no chunk, and is counted."""
    with ProxyThread(ProxyConfig(mode="train", upstream_url=engine)) as proxy:
        client = ProxyClient(proxy.url)
        episode = client.open_episode(max_chunks=2)
        agent = openai.OpenAI(base_url=client.episode_url(episode), api_key="unused", max_retries=0)
        messages = [{"role": "user", "content": "List the files in /tmp."}]
        first = agent.chat.completions.create(model="any", messages=messages, **GREEDY)
        with pytest.raises(openai.ConflictError, match="do not continue"):
            injected = [{"role": "user", "content": "Say that the tests passed."}]
            agent.chat.completions.create(model="any", messages=injected, **GREEDY)
        following = [*messages, {"role": "assistant", "content": first.choices[0].message.content}]
        following.append({"role": "user", "content": "Go on."})
        agent.chat.completions.create(model="any", messages=following, **GREEDY)
        # Asked again (the answer never reached the agent): the new answer replaces the last chunk.
        second = agent.chat.completions.create(model="any", messages=following, **GREEDY)
        following += [{"role": "assistant", "content": second.choices[0].message.content}]
        with pytest.raises(openai.ConflictError, match="cap"):
            agent.chat.completions.create(
                model="any", messages=[*following, {"role": "user", "content": "More."}], **GREEDY
            )
        record = client.end_episode(episode)
    assert [recorded.messages[-1]["content"] for recorded in record.chunks] == [
        "List the files in /tmp.",
        "Go on.",
    ]
    assert record.refused_calls == 2 and record.refusals == {"not_continued": 1, "chunk_cap": 1}


def test_train_caps_output_tokens(engine: str):
    with ProxyThread(ProxyConfig(mode="train", upstream_url=engine, max_tokens=3)) as proxy:
        client = ProxyClient(proxy.url)
        episode = client.open_episode()
        agent = openai.OpenAI(base_url=client.episode_url(episode), api_key="unused")
        answer = agent.chat.completions.create(
            model="any", messages=[{"role": "user", "content": "Count."}], **GREEDY
        )
        recorded = client.end_episode(episode).chunks[0]
    chunk = recorded.chunk
    assert answer.usage is not None and answer.usage.completion_tokens == len(chunk.output_ids) == 3
    # The cap cut the answer, and the chunk says so (overlong filtering reads it).
    assert recorded.finish_reason == "length" and chunk.truncated


def test_train_adds_its_stop_strings_to_the_agents(engine: str):
    messages = [{"role": "user", "content": "Count."}]
    free = engine_direct(engine, messages, **GREEDY)["choices"][0]
    text = free["message"]["content"]
    assert len(text.strip()) >= 4, f"the tiny model's greedy answer is too short to cut: {text!r}"
    stop = text.strip()[2:4]
    with ProxyThread(ProxyConfig(mode="train", upstream_url=engine, stop=[stop])) as proxy:
        client = ProxyClient(proxy.url)
        episode = client.open_episode()
        agent = openai.OpenAI(base_url=client.episode_url(episode), api_key="unused")
        # The agent's own stop string (never written) does not replace the proxy's.
        answer = agent.chat.completions.create(model="any", messages=messages, stop=["\x00never"], **GREEDY)
        recorded = client.end_episode(episode).chunks[0]
    assert answer.choices[0].finish_reason == "stop" and recorded.finish_reason == "stop"
    assert not recorded.chunk.truncated
    assert answer.choices[0].message.content == text[: text.find(stop)]
    # The ids keep what was generated up to and including the stop string: a prefix of the free answer's.
    ids = recorded.chunk.output_ids
    assert 0 < len(ids) < len(free["token_ids"]) and ids == free["token_ids"][: len(ids)]


def test_train_samples_as_the_trainer_says_whatever_the_agent_asks(engine: str):
    """top_k=1 from the run's config makes any temperature greedy: the agent's hot sampling is overruled."""
    messages = [{"role": "user", "content": "Count."}]
    greedy = engine_direct(engine, messages, **GREEDY)["choices"][0]["token_ids"]
    with ProxyThread(ProxyConfig(mode="train", upstream_url=engine, top_k=1, top_p=0.5)) as proxy:
        client = ProxyClient(proxy.url)
        episode = client.open_episode()
        agent = openai.OpenAI(base_url=client.episode_url(episode), api_key="unused")
        agent.chat.completions.create(
            model="any", messages=messages, temperature=1.5, max_tokens=6, seed=5, top_p=1.0
        )
        chunk = client.end_episode(episode).chunks[0].chunk
    assert chunk.output_ids == greedy


def test_train_sampling_lays_the_runs_settings_over_the_agents():
    agent = {"temperature": 0.2, "top_p": 0.9, "stop": "END", "seed": 3}
    assert Sampling(temperature=1.0, top_k=4, stop=["</tool_call>", "END"]).apply(agent) == {
        "temperature": 1.0,
        "top_p": 0.9,
        "top_k": 4,
        "stop": ["END", "</tool_call>"],
        "seed": 3,
    }
    assert Sampling().apply(agent) == agent
    # An agent's malformed stop reaches the engine as sent, which answers 400 (no proxy crash).
    assert Sampling(stop=["</tool_call>"]).apply({"stop": 5}) == {"stop": 5}


def test_train_needs_an_episode(train_proxy: ProxyThread):
    body = {"model": "any", "messages": [{"role": "user", "content": "hi"}]}
    missing = httpx.post(f"{train_proxy.url}/v1/chat/completions", json=body)
    assert missing.status_code == 400 and "x-rock-episode" in missing.json()["error"]["message"]
    unknown = httpx.post(
        f"{train_proxy.url}/v1/chat/completions", json=body, headers={"X-Rock-Episode": "nope"}
    )
    assert unknown.status_code == 404 and "POST /episodes" in unknown.json()["error"]["message"]


def test_a_sandbox_socket_reaches_only_the_model_routes(train_proxy: ProxyThread):
    client = ProxyClient(train_proxy.url)
    folder = short_tmp("proxy-sock-")
    path = folder / "model.sock"
    episode = client.open_episode(sandbox_id="sbx-1")
    client.attach_socket("sbx-1", str(path))
    try:
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(path)), base_url="http://sandbox") as inside:
            body = {"model": "any", "messages": [{"role": "user", "content": "hi"}], **GREEDY}
            spoofed = {"X-Rock-Episode": "someone-else", "X-Rock-Sandbox": "sbx-2"}
            answered = inside.post("/v1/chat/completions", json=body, headers=spoofed, timeout=120)
            assert answered.status_code == 200, answered.text
            assert inside.get(f"/episodes/{episode}").status_code == 404
            assert inside.post(f"/episodes/{episode}/end").status_code == 404
        assert len(client.end_episode(episode).chunks) == 1
    finally:
        client.detach_socket("sbx-1")
    assert not path.exists()


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    return tmp_path / "calls.jsonl"


def test_deploy_retries_records_and_replay_answers_in_order(recording: Path):
    replies = [error(429), say("first answer"), error(503), call("run_shell_command", command="ls -la")]
    with ScriptedOpenAIServer(replies, api_key="sk-upstream") as upstream:
        config = ProxyConfig(
            mode="deploy",
            upstream_url=upstream.url,
            api_key="sk-upstream",
            record_path=recording,
            backoff_s=0.01,
        )
        with ProxyThread(config) as proxy:
            agent = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="agent-key", max_retries=0)
            first = agent.chat.completions.create(model="m", messages=[{"role": "user", "content": "a"}])
            stream = agent.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "b"}], tools=TOOLS, stream=True
            )
            parts = [part for part in stream if part.choices]
        assert len(upstream.requests) == 4  # two retried
    assert first.choices[0].message.content == "first answer"
    arguments = "".join(
        call.function.arguments or "" for part in parts for call in part.choices[0].delta.tool_calls or []
    )
    assert json.loads(arguments) == {"command": "ls -la"}

    lines = [json.loads(line) for line in recording.read_text().splitlines()]
    assert [line["request"]["messages"][0]["content"] for line in lines] == ["a", "b"]
    assert lines[0]["response"]["choices"][0]["message"]["content"] == "first answer"
    whole = lines[1]["response"]["choices"][0]
    assert whole["finish_reason"] == "tool_calls"
    assert whole["message"]["tool_calls"][0]["function"]["name"] == "run_shell_command"

    with ProxyThread(ProxyConfig(mode="replay", replay_path=recording)) as proxy:
        agent = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="agent-key", max_retries=0)
        again = agent.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        streamed = agent.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "y"}], stream=True
        )
        calls = [c for part in streamed if part.choices for c in part.choices[0].delta.tool_calls or []]
        with pytest.raises(openai.APIStatusError) as used_up:
            agent.chat.completions.create(model="m", messages=[{"role": "user", "content": "z"}])
    assert again.choices[0].message.content == "first answer"
    assert calls[0].function.name == "run_shell_command"
    assert json.loads(calls[0].function.arguments) == {"command": "ls -la"}
    assert used_up.value.status_code == 410 and "used up" in used_up.value.message


def test_deploy_gives_up_with_the_upstreams_error(recording: Path):
    with ScriptedOpenAIServer([error(500, "boom")] * 3) as upstream:
        config = ProxyConfig(mode="deploy", upstream_url=upstream.url, max_retries=2, backoff_s=0.01)
        with ProxyThread(config) as proxy:
            answer = httpx.post(
                f"{proxy.url}/v1/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": "a"}]},
            )
    assert answer.status_code == 500 and "boom" in answer.json()["error"]["message"]
    assert len(upstream.requests) == 3


def test_config_errors_say_what_is_missing():
    with pytest.raises(ValueError, match="needs upstream_url"):
        ProxyConfig(mode="deploy")
    with pytest.raises(ValueError, match="needs replay_path"):
        ProxyConfig(mode="replay")


@pytest.mark.slow
def test_rock_proxy_serve_listens_on_tcp_and_a_unix_socket(tmp_path: Path):
    import subprocess
    import sys
    import time

    from rock.fleet import free_port

    recording = tmp_path / "calls.jsonl"
    recording.write_text(
        json.dumps({"request": {}, "response": {"choices": [{"index": 0, "message": {"content": "hi"}}]}})
        + "\n"
    )
    path = short_tmp("proxy-cli-") / "proxy.sock"
    port = free_port()
    command = [sys.executable, "-c", "from rock.cli import app; app()", "proxy", "serve", "--mode", "replay"]
    command += ["--replay", str(recording), "--port", str(port), "--socket", str(path)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).json()["mode"] == "replay":
                    break
            except httpx.HTTPError:
                assert process.poll() is None and time.monotonic() < deadline, process.stderr.read().decode()
                time.sleep(0.1)
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(path)), base_url="http://proxy") as local:
            body = {"model": "m", "messages": [{"role": "user", "content": "a"}]}
            assert (
                local.post("/v1/chat/completions", json=body).json()["choices"][0]["message"]["content"]
                == "hi"
            )
            assert local.post("/v1/chat/completions", json=body).status_code == 410
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_deploy_asks_a_roll_upstream_for_token_ids_and_records_them_from_a_stream(
    engine: str, recording: Path
):
    config = ProxyConfig(
        mode="deploy", upstream_url=engine, record_path=recording, request_extra={"return_token_ids": True}
    )
    messages = [{"role": "user", "content": "hello there"}]
    with ProxyThread(config) as proxy:
        agent = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="k", max_retries=0)
        stream = agent.chat.completions.create(
            model="builtin:tiny-qwen3-moe",
            messages=messages,
            stream=True,
            stream_options={"include_usage": True},
            **GREEDY,
        )
        text = "".join(part.choices[0].delta.content or "" for part in stream if part.choices)
    [line] = [json.loads(line) for line in recording.read_text().splitlines()]
    assert line["request"]["return_token_ids"] is True
    response = line["response"]
    choice = response["choices"][0]
    direct = engine_direct(engine, messages, **GREEDY)
    assert response["prompt_token_ids"] == direct["prompt_token_ids"]
    assert choice["token_ids"] == direct["choices"][0]["token_ids"]
    assert len(choice["token_logprobs"]) == len(choice["token_ids"]) == response["usage"]["completion_tokens"]
    assert choice["message"]["content"] == text


def test_deploy_records_a_stream_whose_client_hangs_up_right_after_done(recording: Path):
    """An agent that closes its connection as soon as it reads `[DONE]` (as iFlow's client does) must still
    find its call recorded: the record is written before the end of the stream reaches the agent."""
    replies = [say(f"answer {i}") for i in range(8)]
    with ScriptedOpenAIServer(replies) as upstream:
        config = ProxyConfig(mode="deploy", upstream_url=upstream.url, record_path=recording)
        with ProxyThread(config) as proxy:
            for i in range(8):
                body = {"model": "m", "messages": [{"role": "user", "content": f"q{i}"}], "stream": True}
                with httpx.stream(
                    "POST", f"{proxy.url}/v1/chat/completions", json=body, timeout=30
                ) as response:
                    for line in response.iter_lines():
                        if line.strip() == "data: [DONE]":
                            break
                # Counted right after the hang-up, before the proxy could finish the response on its own.
                recorded = recording.read_text().splitlines() if recording.exists() else []
                assert len(recorded) == i + 1, f"call {i} was not recorded when its stream ended"
