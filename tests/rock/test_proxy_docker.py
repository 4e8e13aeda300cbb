"""A `--network none` sandbox reaches the model proxy through the rocklet's forwarder, and nothing else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iflow.testing import ScriptedOpenAIServer, say
from rock.fleet import LocalFleet
from rock.proxy import ProxyClient, ProxyConfig
from rock.proxy.server import ProxyThread
from rock.sdk.sandbox import Sandbox

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ASK = """
import json, sys, urllib.request
body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi from the sandbox"}]}).encode()
headers = {"Content-Type": "application/json"}
request = urllib.request.Request(sys.argv[1] + "/v1/chat/completions", body, headers)
print(json.load(urllib.request.urlopen(request, timeout=30))["choices"][0]["message"]["content"])
"""
CONNECT = """
import socket, sys
for host, port in [a.split(":") for a in sys.argv[1:]]:
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
        print(host, port, "open")
    except OSError as error:
        print(host, port, "refused", type(error).__name__)
"""
EPISODES = """
import sys, urllib.request, urllib.error
try:
    urllib.request.urlopen(sys.argv[1] + "/episodes/" + sys.argv[2], timeout=10)
    print("readable")
except urllib.error.HTTPError as error:
    print(error.code)
"""


def test_sandbox_reaches_the_proxy_through_the_forwarder_only(fleet: LocalFleet, tmp_path: Path):
    recording = tmp_path / "calls.jsonl"
    with (
        ScriptedOpenAIServer([say("hello, sandbox")]) as upstream,
        ProxyThread(ProxyConfig(mode="deploy", upstream_url=upstream.url, record_path=recording)) as proxy,
        ProxyClient(proxy.url) as client,
        Sandbox("python:3.11", admin_url=fleet.url, cpus=0.5, memory="256m") as sandbox,
    ):
        assert sandbox.info.host_dir is not None
        episode = client.open_episode(sandbox_id=sandbox.id)
        client.attach_socket(sandbox.id, f"{sandbox.info.host_dir}/model.sock")
        port = sandbox.forward(0)
        inside = f"http://127.0.0.1:{port}"

        answered = sandbox.exec(["python3", "-c", ASK, inside], timeout=60)
        assert answered.output.strip() == "hello, sandbox", answered.output
        assert sandbox.exec(["python3", "-c", EPISODES, inside, episode], timeout=30).output.strip() == "404"

        interfaces = [
            line.split(":")[0].strip() for line in sandbox.exec("cat /proc/net/dev").output.splitlines()[2:]
        ]
        assert interfaces == ["lo"]
        gateway = "172.17.0.1"
        targets = [
            f"127.0.0.1:{proxy.port}",
            f"{gateway}:{proxy.port}",
            f"{gateway}:{upstream.port}",
            "1.1.1.1:80",
        ]
        probed = sandbox.exec(["python3", "-c", CONNECT, *targets], timeout=60).output.splitlines()
        assert len(probed) == len(targets) and all("refused" in line for line in probed), probed

    lines = [json.loads(line) for line in recording.read_text().splitlines()]
    assert len(lines) == 1 and lines[0]["episode_id"] == episode
    assert lines[0]["request"]["messages"][0]["content"] == "hi from the sandbox"
