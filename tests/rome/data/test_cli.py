"""`rome data` on bad input: each error names the file or value at fault and says what to do."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rome.cli import app
from rome.data.collect import CollectError, check_endpoint
from rome.data.taskset import generate


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["data", *args])
    return result.exit_code, " ".join(result.output.split())


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_families_lists_name_domain_variety_and_knobs() -> None:
    code, output = run("families", "--seeds", "20")
    assert code == 0
    assert "fix-bug debugging L1=" in output and "(of 20 seeds) level: 1-3" in output
    assert "hazard safety" in output


def test_unknown_family_and_bad_knob(tmp_path: Path) -> None:
    code, output = run("generate", "spreadsheets", "--out", str(tmp_path / "t"))
    assert code == 2 and "unknown family 'spreadsheets'" in output and "text-search" in output
    code, output = run("generate", "numeric", "--out", str(tmp_path / "t"), "--knob", "level")
    assert code == 2 and "is not KEY=VALUE" in output
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize("command", ["validate", "collect", "split"])
def test_a_folder_that_is_not_a_task_set(tmp_path: Path, command: str) -> None:
    args = [command, str(tmp_path)] + (["--out", str(tmp_path / "x.jsonl")] if command == "collect" else [])
    code, output = run(*args)
    assert code == 2 and f"{tmp_path} is not a task set" in output and "rome data generate" in output


def test_a_model_url_that_does_not_answer(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    with pytest.raises(CollectError, match="does not answer"):
        check_endpoint(url)
    generate("numeric", 1, 0, tmp_path / "tasks", {"level": 1})
    code, output = run(
        "collect",
        str(tmp_path / "tasks"),
        "--out",
        str(tmp_path / "t.jsonl"),
        "--agent",
        "iflow",
        "--model",
        url,
    )
    assert code == 2 and "does not answer" in output and "roll serve" in output
    assert not (tmp_path / "t.jsonl").exists()


def test_a_line_that_is_not_a_trajectory(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text('{"id": "x"}\n')
    code, output = run("export-sft", str(source), "--out", str(tmp_path / "sft.jsonl"))
    assert code == 2 and f"{source}:1: not a trajectory record" in output
    code, output = run(
        "filter", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "f.jsonl"), "--no-replay"
    )
    assert code == 2 and "does not exist" in output
