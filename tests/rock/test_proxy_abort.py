"""An agent that hangs up aborts its call in the engine: the proxy (train mode) in front of the real
`roll serve` app over a scripted engine (a test double for the model's choices) that holds every request
until the server aborts it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from rock.proxy import ProxyClient, ProxyConfig
from rock.proxy.server import ProxyThread
from roll.engine.server.loopback import LoopbackServer
from roll.testing import ScriptedEngine

pytestmark = pytest.mark.slow
ABORT_WAIT_S = 60.0


@pytest.fixture(scope="module")
def engine() -> Iterator[tuple[ScriptedEngine, str]]:
    from roll.engine.server import create_app
    from roll.models import load_model

    loaded = load_model("builtin:tiny-qwen3-moe")
    scripted = ScriptedEngine(loaded.tokenizer)
    server = LoopbackServer(create_app(scripted, loaded), "scripted-engine")
    try:
        yield scripted, f"{server.url}/v1"
    finally:
        server.close()


def ask(url: str, read_timeout: float) -> httpx.Response:
    body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "Say hi."}]}
    with httpx.Client(timeout=httpx.Timeout(read_timeout, connect=10.0)) as client:
        return client.post(f"{url}/chat/completions", json=body)


def test_a_call_the_agent_gave_up_on_is_aborted_in_the_engine_and_not_recorded(
    engine: tuple[ScriptedEngine, str],
):
    scripted, url = engine
    with ProxyThread(ProxyConfig(mode="train", upstream_url=url)) as thread, ProxyClient(thread.url) as proxy:
        episode = proxy.open_episode("gives-up")
        scripted.hold = True
        try:
            with pytest.raises(httpx.ReadTimeout):
                ask(proxy.episode_url(episode), read_timeout=2.0)
            deadline = time.monotonic() + ABORT_WAIT_S
            while not scripted.aborted and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            scripted.hold = False
        assert len(scripted.aborted) == 1, "the engine kept generating for an agent that had hung up"
        assert scripted.in_flight == 0
        assert proxy.episode(episode).chunks == []

        # The next call of the episode is answered and recorded as usual.
        scripted.push("hi")
        answer = ask(proxy.episode_url(episode), read_timeout=60.0)
        assert answer.status_code == 200 and answer.json()["choices"][0]["message"]["content"] == "hi"
        assert len(proxy.episode(episode).chunks) == 1
