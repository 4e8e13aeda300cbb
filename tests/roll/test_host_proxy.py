"""An agent on the host (env.agent.placement: host) calls the train-mode proxy and the engine in the rollout
worker's own process (roll.rollout.terminal.serving): no server and no listening socket, and every check the
proxy's HTTP route makes (continuity, chunk cap, refusal counts). The engine is the scripted test double of
the model's choices (real tokenizer, chat template and tool-call parsing); in the first test it sits behind a
real Ray actor and the worker's `EngineFront`, as in a run."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from iflow.llm import EndpointError, LLMClient, LLMConfig, LLMError
from rock.proxy.train import InProcessProxy
from roll.rollout.config import SamplingConfig
from roll.rollout.engine_front import EngineFront
from roll.rollout.terminal import serving
from roll.rollout.terminal.serving import AgentEndpoints, EngineChat, HostProxy, ServedTokenizer
from roll.testing import ScriptedEngine

SYSTEM = {"role": "system", "content": "You are a terminal agent."}
SHELL_TOOL = {
    "type": "function",
    "function": {
        "name": "run_shell_command",
        "description": "Run a shell command.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
    },
}


def shell_call(command: str) -> str:
    call = {"name": "run_shell_command", "arguments": {"command": command}}
    return "<tool_call>" + json.dumps(call) + "</tool_call>"


def ask(content: str) -> dict[str, Any]:
    return {"model": "policy", "messages": [SYSTEM, {"role": "user", "content": content}]}


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """The rollout worker's event loop (the agent's calls run there), in a thread of its own."""
    running = asyncio.new_event_loop()
    thread = threading.Thread(target=running.run_forever, daemon=True)
    thread.start()
    yield running
    running.call_soon_threadsafe(running.stop)
    thread.join(timeout=10)
    running.close()


@pytest.fixture
def scripted(tiny_moe: Any, loop: asyncio.AbstractEventLoop) -> tuple[ScriptedEngine, HostProxy]:
    engine = ScriptedEngine(tiny_moe.tokenizer)
    return engine, HostProxy(InProcessProxy(EngineChat(engine, tiny_moe)), loop)


@pytest.fixture
def no_server(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every socket that starts listening in this process (none may) and any loopback server (none may)."""
    listened: list[Any] = []
    listen = socket.socket.listen

    def recorded(self: socket.socket, *args: Any) -> None:
        listened.append(self.getsockname())
        listen(self, *args)

    def refused(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a host agent's model call started an HTTP server")

    monkeypatch.setattr(socket.socket, "listen", recorded)
    monkeypatch.setattr(serving, "LoopbackServer", refused)
    return listened


def test_a_host_agents_call_reaches_the_engine_actor_in_process_with_no_server(
    tiny_moe: Any, ray_session: None, loop: asyncio.AbstractEventLoop, no_server: list[Any]
) -> None:
    import ray

    @ray.remote(num_cpus=0)
    class ScriptedActor:
        """The engine actor's calls the worker's front makes, over the scripted engine."""

        def __init__(self, tokenizer: Any, replies: list[str]) -> None:
            self.engine = ScriptedEngine(tokenizer, replies)

        def max_context(self) -> int:
            return self.engine.max_context

        async def generate(self, request: Any) -> Any:
            return await self.engine.generate(request)

        async def abort(self, request_id: str) -> None:
            await self.engine.abort(request_id)

    reply = shell_call("ls /app")
    actor = ScriptedActor.remote(tiny_moe.tokenizer, [reply])  # type: ignore[attr-defined]
    endpoints = AgentEndpoints(
        [EngineFront(actor, "w0-e0")], ServedTokenizer(tiny_moe.model_id, tiny_moe.tokenizer), 60.0
    )
    proxy = endpoints.host_proxy(0, SamplingConfig(max_new_tokens=64), loop)
    episode_id = proxy.open_episode("host-episode")
    llm = LLMClient(
        LLMConfig(base_url="http://unused.invalid/v1", model="policy"), endpoint=proxy.endpoint(episode_id)
    )
    answer = llm.complete([SYSTEM, {"role": "user", "content": "List /app."}], tools=None)
    record = proxy.end_episode(episode_id)
    endpoints.close()

    assert [(call.name, call.arguments) for call in answer.tool_calls] == [
        ("run_shell_command", {"command": "ls /app"})
    ]
    assert len(record.chunks) == 1 and record.refused_calls == 0
    chunk = record.chunks[0].chunk
    assert chunk.output_ids[:-1] == tiny_moe.tokenizer.encode(
        reply, add_special_tokens=False
    )  # + end of turn
    assert chunk.output_logprobs is not None and len(chunk.output_logprobs) == len(chunk.output_ids)
    assert "List /app." in tiny_moe.tokenizer.decode(chunk.context_ids)
    assert no_server == [] and endpoints._servers == {} and endpoints._proxies == {}


def test_rollout_stop_strings_end_an_answer_at_its_tool_call(
    tiny_moe: Any, loop: asyncio.AbstractEventLoop
) -> None:
    """A policy that repeats the closing tag instead of ending its turn (what RL drifted to): with
    `stop: ['</tool_call>']` the recorded answer ends at the first one and the call is still parsed."""
    reply = shell_call("ls /app")
    engine = ScriptedEngine(tiny_moe.tokenizer, [reply + "</tool_call>" * 5])
    endpoints = AgentEndpoints(
        [_DirectFront(engine)], ServedTokenizer(tiny_moe.model_id, tiny_moe.tokenizer), 60.0
    )
    proxy = endpoints.host_proxy(0, SamplingConfig(max_new_tokens=64, stop=["</tool_call>"]), loop)
    episode_id = proxy.open_episode("stopped")
    llm = LLMClient(
        LLMConfig(base_url="http://unused.invalid/v1", model="policy"), endpoint=proxy.endpoint(episode_id)
    )
    answer = llm.complete([SYSTEM, {"role": "user", "content": "List /app."}], tools=[SHELL_TOOL])
    recorded = proxy.end_episode(episode_id).chunks[0]
    endpoints.close()

    assert [(call.name, call.arguments) for call in answer.tool_calls] == [
        ("run_shell_command", {"command": "ls /app"})
    ]
    assert recorded.chunk.output_ids == tiny_moe.tokenizer.encode(reply, add_special_tokens=False)
    assert recorded.finish_reason == "tool_calls"


class _DirectFront:
    """The worker's engine front over an engine in this process (no Ray actor)."""

    def __init__(self, engine: ScriptedEngine) -> None:
        self.engine = engine

    def load_max_context(self) -> None:
        """The engine is at hand: its context length needs no remote call."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)


def test_a_call_that_does_not_continue_the_episode_is_refused_and_counted(
    scripted: tuple[ScriptedEngine, HostProxy], no_server: list[Any]
) -> None:
    engine, proxy = scripted
    engine.push("Hello.", "Forged.")
    episode_id = proxy.open_episode()
    endpoint = proxy.endpoint(episode_id)
    assert endpoint.chat(ask("Say hello."), 30)["choices"][0]["message"]["content"] == "Hello."
    with pytest.raises(EndpointError) as refused:
        endpoint.chat(ask("Say that the tests passed."), 30)
    record = proxy.end_episode(episode_id)

    assert refused.value.status == 409 and "does not record this call" in str(refused.value)
    assert len(record.chunks) == 1 and record.refused_calls == 1 and record.refusals == {"not_continued": 1}
    assert len(engine.prompts) == 1  # the refused call never reached the engine
    assert no_server == []


def test_the_chunk_cap_holds_in_process(scripted: tuple[ScriptedEngine, HostProxy]) -> None:
    engine, proxy = scripted
    engine.push("One.", "Two.")
    episode_id = proxy.open_episode(max_chunks=1)
    endpoint = proxy.endpoint(episode_id)
    first = ask("Count.")
    endpoint.chat(first, 30)
    more = [
        *first["messages"],
        {"role": "assistant", "content": "One."},
        {"role": "user", "content": "More."},
    ]
    with pytest.raises(EndpointError) as refused:
        endpoint.chat({"model": "policy", "messages": more}, 30)
    record = proxy.end_episode(episode_id)

    assert refused.value.status == 409
    assert len(record.chunks) == 1 and record.refusals == {"chunk_cap": 1}


def test_the_agent_growing_its_history_in_place_does_not_rewrite_the_episode(
    scripted: tuple[ScriptedEngine, HostProxy],
) -> None:
    """The agent appends to the very list it sent: the proxy keeps its own copy, as over HTTP, so the next
    call continues the episode (a second chunk) instead of looking like a retry of the first."""
    engine, proxy = scripted
    engine.push("One.", "Two.")
    episode_id = proxy.open_episode()
    endpoint = proxy.endpoint(episode_id)
    history = ask("Count.")["messages"]
    answer = endpoint.chat({"model": "policy", "messages": history}, 30)
    history += [answer["choices"][0]["message"], {"role": "user", "content": "More."}]
    endpoint.chat({"model": "policy", "messages": history}, 30)
    record = proxy.end_episode(episode_id)

    assert [len(call.messages) for call in record.chunks] == [2, 4] and record.refused_calls == 0


def test_a_call_past_its_time_is_aborted_in_the_engine_and_not_recorded(
    scripted: tuple[ScriptedEngine, HostProxy],
) -> None:
    engine, proxy = scripted
    engine.hold = True  # every request stays open until it is aborted
    episode_id = proxy.open_episode()
    llm = LLMClient(
        LLMConfig(base_url="http://unused.invalid/v1", model="policy", timeout_s=1, max_retries=0),
        endpoint=proxy.endpoint(episode_id),
    )
    with pytest.raises(LLMError, match="did not answer in 1 s"):
        llm.complete(ask("Think.")["messages"])
    deadline = time.monotonic() + 10
    while not engine.aborted and time.monotonic() < deadline:
        time.sleep(0.05)
    record = proxy.end_episode(episode_id)

    assert len(engine.aborted) == 1 and record.chunks == []


def test_the_iflow_client_streams_the_answers_text_and_reports_refusals(
    scripted: tuple[ScriptedEngine, HostProxy],
) -> None:
    engine, proxy = scripted
    engine.push("Looking." + shell_call("pwd"))
    episode_id = proxy.open_episode()
    llm = LLMClient(
        LLMConfig(base_url="http://unused.invalid/v1", model="policy", max_retries=0),
        endpoint=proxy.endpoint(episode_id),
    )
    shown: list[str] = []
    reply = llm.complete(ask("Where am I?")["messages"], on_text=shown.append)

    assert "".join(shown) == "Looking." and reply.content == "Looking."
    assert [(call.name, call.arguments) for call in reply.tool_calls] == [
        ("run_shell_command", {"command": "pwd"})
    ]
    assert not reply.usage_estimated and reply.usage.completion_tokens > 0
    with pytest.raises(LLMError, match="HTTP 409"):
        llm.complete(ask("Something else.")["messages"])
    assert proxy.end_episode(episode_id).refused_calls == 1
