"""`rock admin serve` as the CLI runs it: the GEM env routes on the admin itself, and the model proxy it
starts next to its local worker, listening on a sandbox's socket. Real Docker, a real fleet, loopback only."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator

import httpx
import pytest

from iflow.testing import ScriptedOpenAIServer, say
from rock.fleet import LocalFleet, free_port, short_tmp
from rock.proxy import ProxyClient
from rock.sdk.envs import list_envs, make
from rock.sdk.sandbox import Sandbox

pytestmark = [pytest.mark.docker, pytest.mark.slow]
ENV_ID = "game:GuessTheNumber-v0-easy"
ASK = """
import json, sys, urllib.request
body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
headers = {"Content-Type": "application/json"}
request = urllib.request.Request(sys.argv[1] + "/v1/chat/completions", body, headers)
print(json.load(urllib.request.urlopen(request, timeout=30))["choices"][0]["message"]["content"])
"""


@pytest.fixture(scope="module")
def upstream() -> Iterator[ScriptedOpenAIServer]:
    """The model behind the admin's proxy (test double for an LLM's choices)."""
    with ScriptedOpenAIServer([say("hello from upstream")]) as server:
        yield server


@pytest.fixture(scope="module")
def proxy_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def fleet(upstream: ScriptedOpenAIServer, proxy_port: int) -> Iterator[LocalFleet]:
    from rock.images import ensure_base_images

    ensure_base_images()
    state = short_tmp("rock-adm-")
    proxy = ["--proxy-mode", "deploy", "--proxy-upstream", upstream.url, "--proxy-port", str(proxy_port)]
    fleet = LocalFleet(
        state,
        f"admin-envs-{uuid.uuid4().hex[:6]}",
        admin_args=[*proxy, "--proxy-record", str(state / "calls.jsonl")],
    )
    fleet.admin.start()
    try:
        fleet.wait_for_workers()
        yield fleet
    finally:
        fleet.close()


def test_gem_routes_on_the_admin_match_local_gem(fleet: LocalFleet):
    import gem

    assert ENV_ID in list_envs(fleet.url).registered
    local = gem.make(ENV_ID)
    local_obs, _ = local.reset(seed=4)
    with make(ENV_ID, url=fleet.url) as env:
        assert [(e.handle, e.env_id) for e in list_envs(fleet.url).open] == [(env.handle, ENV_ID)]
        observation, _ = env.reset(seed=4)
        assert observation == local_obs
        remote_step = env.step("\\boxed{5}")
    local_step = local.step("\\boxed{5}")
    assert remote_step[:4] == tuple(local_step[:4])
    assert list_envs(fleet.url).open == []


def test_admin_started_proxy_answers_a_sandbox_through_its_socket(fleet: LocalFleet, proxy_port: int):
    proxy_url = f"http://127.0.0.1:{proxy_port}"
    assert httpx.get(f"{proxy_url}/health", timeout=10).json() == {"status": "ok", "mode": "deploy"}
    with (
        ProxyClient(proxy_url) as client,
        Sandbox("python:3.11", admin_url=fleet.url, cpus=0.5, memory="256m") as sandbox,
    ):
        assert sandbox.info.host_dir is not None
        episode = client.open_episode(sandbox_id=sandbox.id)
        client.attach_socket(sandbox.id, f"{sandbox.info.host_dir}/model.sock")
        port = sandbox.forward(0)
        answered = sandbox.exec(["python3", "-c", ASK, f"http://127.0.0.1:{port}"], timeout=60)
        assert answered.output.strip() == "hello from upstream", answered.output
        client.detach_socket(sandbox.id)
    recorded = [json.loads(line) for line in (fleet.state_dir / "calls.jsonl").read_text().splitlines()]
    assert [r["episode_id"] for r in recorded] == [episode]


def test_proxy_options_that_cannot_start_are_refused(tmp_path):
    serve = [sys.executable, "-m", "rock.cli", "admin", "serve", "--port", str(free_port())]
    refused = subprocess.run(
        [*serve, "--state-dir", str(tmp_path), "--no-local-worker", "--proxy-mode", "deploy"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 2
    assert "the model proxy cannot start" in refused.stderr and "--proxy-upstream" in refused.stderr
