"""A real run against `roll serve` with the builtin small model: it ends cleanly with a valid session file,
whatever the model says."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from iflow.agent import ApprovalMode, TerminationReason
from iflow.agent.build import AgentOptions, build_agent, build_parts
from iflow.sessions import SessionStore

pytestmark = pytest.mark.slow
MODEL = "builtin:smollm2-135m-instruct"
START_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def roll_serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from rock.fleet import free_port

    port = free_port()
    log = tmp_path_factory.mktemp("roll-serve") / "serve.log"
    roll = str(Path(sys.executable).parent / "roll")
    with log.open("wb") as out:
        process = subprocess.Popen(
            [roll, "serve", "--model", MODEL, "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"roll serve exited ({process.returncode}):\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{url}/models", timeout=2).is_success:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"roll serve did not answer within {START_TIMEOUT_S} s:\n{log.read_text()}"
                )
            time.sleep(0.5)
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


def test_a_real_small_model_run_ends_cleanly(roll_serve: str, git_repo: Path) -> None:
    # Plan mode: read-only tools (whatever the model calls changes nothing) and a shorter prompt to prefill.
    options = AgentOptions(
        cwd=git_repo, base_url=roll_serve, model=MODEL, max_turns=1, approval_mode=ApprovalMode.PLAN
    )
    parts = build_parts(options)
    parts.llm.config.max_output_tokens = 16  # a CPU decodes slowly; the content does not matter here
    session = SessionStore().create(str(git_repo), MODEL)
    try:
        result = build_agent(parts, session=session).run("What does calc.py do?")
    finally:
        parts.close()
    assert result.termination in (TerminationReason.COMPLETED, TerminationReason.MAX_TURNS)
    assert result.rounds == 1 and result.usage.prompt_tokens > 0 and not result.usage.completion_tokens > 16
    records = [json.loads(line) for line in session.path.read_text().splitlines()]
    assert records[0]["type"] == "session" and records[-1]["type"] == "result"
    assert records[-1]["termination_reason"] == result.termination.value
    loaded = SessionStore().load(session.id)
    assert [m["role"] for m in loaded.messages][:3] == ["system", "user", "assistant"]
    assert "return a - b" in (git_repo / "calc.py").read_text()
