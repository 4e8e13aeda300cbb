"""ROCK's servers read one config model each: `--config FILE` (YAML of the model), then the command's flags,
then `--set KEY=VALUE`, validated once; a bad key or value is refused with its name. The servers are not
started: the function that would serve records the config it got."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rock.cli import app


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    got: dict[str, Any] = {}
    monkeypatch.setattr("rock.serving.run_server", lambda server: None)
    monkeypatch.setattr(
        "rock.admin.server.serve_admin",
        lambda config, level, proxy, port: got.update(admin=config, proxy=proxy),
    )
    monkeypatch.setattr(
        "rock.worker.server.serve_worker", lambda config, log_level: got.update(worker=config)
    )
    monkeypatch.setattr("rock.proxy.server.serve", lambda config, *where: got.update(proxy=config))
    return got


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_admin_file_then_flags_then_set(tmp_path: Path, served: dict[str, Any]) -> None:
    config = tmp_path / "admin.yaml"
    config.write_text("port: 9001\nmax_waiting: 7\nlimits: {max_cpus: 2}\nlocal_worker: {slots: 3}\n")
    state = tmp_path / "state"
    code, output = invoke(
        "admin", "serve", "--config", str(config), "--port", "9002", "--worker-cpus", "4",
        "--state-dir", str(state), "--set", "limits.max_pids=100", "--set", "max_waiting=9",
    )  # fmt: skip
    assert code == 0, output
    admin = served["admin"]
    assert (admin.port, admin.max_waiting, admin.limits.max_cpus, admin.limits.max_pids) == (
        9002,
        9,
        2.0,
        100,
    )
    assert (
        admin.host == "127.0.0.1" and admin.heartbeat_timeout == 15.0
    )  # defaults stand where nothing is set
    worker = admin.local_worker
    assert (worker.slots, worker.cpus, worker.state_dir, admin.state_dir) == (3, 4.0, state, state)
    assert served["proxy"] is None


def test_admin_flags_alone_build_what_they_did(tmp_path: Path, served: dict[str, Any]) -> None:
    code, output = invoke(
        "admin", "serve", "--state-dir", str(tmp_path), "--api-key", "k" * 16, "--max-sandboxes", "2",
        "--warm", "busybox=2", "--no-local-worker", "--proxy-mode", "replay", "--proxy-replay", "r.jsonl",
    )  # fmt: skip
    assert code == 0, output
    admin = served["admin"]
    assert admin.local_worker is None and admin.warm == {"busybox": 2}
    assert [(k.name, k.max_sandboxes) for k in admin.api_keys] == [("default", 2)]
    assert served["proxy"].mode == "replay" and served["proxy"].replay_path == Path("r.jsonl")


def test_a_bad_key_or_value_is_named(tmp_path: Path, served: dict[str, Any]) -> None:
    code, output = invoke("admin", "serve", "--no-local-worker", "--set", "limits.max_gpus=1")
    assert code == 2 and "limits.max_gpus: unknown key" in output and "max_cpus" in output
    code, output = invoke("worker", "serve", "--admin", "http://a:1", "--set", "slots=0")
    assert code == 2 and "slots" in output and "greater than 0" in output
    code, output = invoke("proxy", "serve", "--config", str(tmp_path / "missing.yaml"))
    assert code == 2 and "does not exist" in output
    assert not served


def test_worker_and_proxy_read_their_models(tmp_path: Path, served: dict[str, Any]) -> None:
    config = tmp_path / "worker.yaml"
    config.write_text("admin_url: http://admin:8080/\nslots: 5\nheartbeat_interval: 0.5\n")
    code, output = invoke(
        "worker", "serve", "--config", str(config), "--id", "w1", "--token-file", str(tmp_path / "none")
    )
    assert code == 2 and "no token file" in output
    code, output = invoke("worker", "serve", "--config", str(config), "--id", "w1", "--token", "t" * 16)
    assert code == 0, output
    worker = served["worker"]
    assert (worker.admin_url, worker.id, worker.slots, worker.heartbeat_interval) == (
        "http://admin:8080",
        "w1",
        5,
        0.5,
    )
    code, output = invoke("worker", "serve")
    assert code == 2 and "pass --admin URL" in output

    code, output = invoke(
        "proxy", "serve", "--mode", "replay", "--replay", "r.jsonl", "--set", "max_retries=1"
    )
    assert code == 0, output
    assert (served["proxy"].mode, served["proxy"].max_retries) == ("replay", 1)
