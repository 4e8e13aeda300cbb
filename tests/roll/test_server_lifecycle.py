"""`roll serve` as a command, and requests aborted in the engine when their client hangs up."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import httpx
import openai
import pytest
from typer.testing import CliRunner

from roll.cli import app

TINY = "builtin:tiny-qwen3-moe"
LONG = {"model": TINY, "messages": [{"role": "user", "content": "Go on forever."}], "max_tokens": 4000}


def _engine_counter(root: str, name: str) -> float:
    for line in httpx.get(f"{root}/metrics").text.splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[1])
    raise AssertionError(f"{name} is missing from /metrics")


def _wait_until_idle(root: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        health = httpx.get(f"{root}/health").json()
        if health["running"] == 0 and health["waiting"] == 0:
            return
        time.sleep(0.1)
    raise AssertionError(f"the engine still has work after {timeout_s} s: {health}")


@pytest.mark.parametrize("stream", [True, False])
def test_a_client_that_hangs_up_aborts_its_request(tiny_moe_server: str, stream: bool) -> None:
    root = tiny_moe_server.removesuffix("/v1")
    _wait_until_idle(root)
    before = _engine_counter(root, "roll_engine_generated_tokens")
    body = {**LONG, "temperature": 0, "stream": stream}
    if stream:
        with httpx.stream("POST", f"{tiny_moe_server}/chat/completions", json=body, timeout=30) as response:
            lines = response.iter_lines()
            assert next(lines).startswith("data: ")
    else:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{tiny_moe_server}/chat/completions", json=body, timeout=1.0)
    _wait_until_idle(root)
    assert _engine_counter(root, "roll_engine_generated_tokens") - before < LONG["max_tokens"]


def test_serve_with_an_unknown_model_says_what_is_available() -> None:
    result = CliRunner().invoke(app, ["serve", "--model", "builtin:nope"])
    assert result.exit_code == 2
    assert "builtin:smollm2-135m-instruct" in result.output
    assert "builtin:tiny-qwen3-moe" in result.output


@pytest.mark.slow
def test_roll_serve_answers_the_openai_client(tiny_moe_server: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "roll.cli", "serve", "--model", TINY, "--port", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, process.stdout.read() if process.stdout else ""
            assert time.monotonic() < deadline, "roll serve did not become healthy in 120 s"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.25)
        api = openai.OpenAI(
            base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=60
        )
        response = api.chat.completions.create(
            model=TINY, messages=[{"role": "user", "content": "hi"}], max_tokens=3, temperature=0
        )
        assert response.choices[0].finish_reason in ("length", "stop")
        assert response.usage.completion_tokens >= 1
    finally:
        process.terminate()
        process.wait(timeout=30)
