"""`rome-bench terminal-pro --agent iflow --model builtin:...` serves the model itself, and an agent that
cannot run as configured stops the run before its first trial."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from rome.bench.cli import app
from rome.bench.model_server import ModelServerError, served_model, serves_locally


def dead_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # closed again: nothing listens there


@pytest.fixture
def no_iflow_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IFLOW_HOME", str(tmp_path / "iflow-home"))
    monkeypatch.setenv("IFLOW_SYSTEM_SETTINGS", str(tmp_path / "no-system-settings.json"))
    for variable in ("IFLOW_baseUrl", "IFLOW_BASE_URL", "IFLOW_modelName"):
        monkeypatch.delenv(variable, raising=False)


def test_which_models_are_served_locally(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    assert serves_locally("builtin:smollm2-135m-instruct") and serves_locally(str(tmp_path / "model"))
    assert not serves_locally("http://127.0.0.1:8000/v1") and not serves_locally("gpt-4o")
    assert not serves_locally(str(tmp_path))  # a folder without config.json is no model


@pytest.mark.usefixtures("no_iflow_settings")
@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ([], "--agent iflow needs --model"),
        (["--model", "some-model"], "no model endpoint is configured"),
        (["--model", f"http://127.0.0.1:{dead_port()}/v1"], "is the endpoint up?"),
        (["--model", "builtin:tiny-qwen3-moe", "--sandbox", "docker"], "use --sandbox rock"),
    ],
)
def test_an_iflow_setup_that_cannot_work_stops_before_any_trial(
    tmp_path: Path, extra: list[str], expected: str
) -> None:
    out = tmp_path / "run"
    args = ["terminal-pro", "--agent", "iflow", "--task-id", "fix-permissions", "--output", str(out), *extra]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert expected in " ".join(result.output.split())
    assert not out.exists()  # nothing started: no run folder, no trials


@pytest.mark.slow
def test_served_model_answers_for_the_block_and_stops_after_it(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with served_model("builtin:tiny-qwen3-moe", log) as url:
        models = httpx.get(f"{url}/models", timeout=10).json()["data"]
        assert [m["id"] for m in models] == ["builtin:tiny-qwen3-moe"]
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/models", timeout=5)
    unknown = served_model("builtin:no-such-model", tmp_path / "bad.log")
    with pytest.raises(ModelServerError, match="no builtin model has that name"), unknown:
        pass


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.usefixtures("no_iflow_settings")
def test_iflow_with_a_builtin_model_runs_its_trials_against_the_served_model(tmp_path: Path) -> None:
    out = tmp_path / "run"
    command = [sys.executable, "-c", "from rome.bench.cli import app; app()", "terminal-pro"]
    command += ["--agent", "iflow", "--model", "builtin:tiny-qwen3-moe", "--task-id", "fix-permissions"]
    command += ["--timeout-multiplier", "0.1", "--output", str(out)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    trial = json.loads((out / "trials" / "fix-permissions__0.json").read_text())
    assert "no model endpoint" not in (trial["error"] or "")
    assert trial["failure_mode"] in (None, "agent_timeout")  # the random tiny model solves nothing
    served = (out / "model-server.log").read_text()
    assert '"POST /v1/chat/completions HTTP/1.1" 200' in served  # the agent's calls reached the model
    assert json.loads((out / "run.json").read_text())["model"] == "builtin:tiny-qwen3-moe"
