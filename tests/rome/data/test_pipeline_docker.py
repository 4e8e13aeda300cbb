"""The README's command sequence at a small size, through the `rome data` CLI: generate every family,
validate, collect with the oracle teacher, filter (with the execution replay), export both SFT stages, and
draw the funnel. One doctored trajectory (its last command changed to write a wrong answer, its verdict left
as 'passed') must be dropped by the replay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from roll.sft.data import read_examples
from rome.cli import app
from rome.data.families import FAMILIES

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def rome(*args: str) -> str:
    result = CliRunner().invoke(app, ["data", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_the_readme_sequence_end_to_end(tmp_path: Path) -> None:
    tasks, runs = tmp_path / "tasks", tmp_path / "runs"
    for family in FAMILIES:
        rome("generate", family, "--n", "1", "--seed", "11", "--knob", "level=1", "--out", str(tasks))
    rome("split", str(tasks), "--eval-fraction", "0.2")
    assert "0 invalid" in rome("validate", str(tasks), "--concurrency", "3")
    collected = runs / "trajectories.jsonl"
    rome(
        "collect",
        str(tasks),
        "--out",
        str(collected),
        "--attempts",
        "2",
        "--mistake-rate",
        "0.5",
        "--concurrency",
        "3",
    )
    lines = collected.read_text().splitlines()
    assert len(lines) == 2 * len(FAMILIES)
    doctored = json.loads(lines[0])
    doctored["id"] = doctored["id"] + "-doctored"
    last_call = [m for m in doctored["messages"] if m.get("tool_calls")][-1]["tool_calls"][0]
    last_call["function"]["arguments"] = json.dumps({"command": "echo 0 > /app/answer.txt"})
    collected.write_text("\n".join([*lines, json.dumps(doctored)]) + "\n")

    filtered = runs / "filtered.jsonl"
    rome("filter", str(collected), "--out", str(filtered), "--concurrency", "3")
    report = json.loads((runs / "filtered.jsonl.report.json").read_text())
    replay = report["stages"][-1]
    assert replay["stage"] == "replay"
    assert list(replay["dropped"]) == [doctored["id"]]
    assert report["kept"] == 2 * len(FAMILIES)

    sft, sft2 = runs / "sft.jsonl", runs / "sft-stage2.jsonl"
    rome("export-sft", str(filtered), "--out", str(sft))
    rome("export-sft", str(filtered), "--out", str(sft2), "--stage", "2")
    examples = read_examples(sft)
    assert len(examples) == 2 * len(FAMILIES)
    assistants = [m for e in examples for m in e.messages if m["role"] == "assistant"]
    assert all(isinstance(m["error"], bool) and isinstance(m["relevant"], bool) for m in assistants)
    stage2 = read_examples(sft2)
    assert len(FAMILIES) <= len(stage2) < len(examples)
    assert not any(m.get("error") for e in stage2 for m in e.messages)

    rome(
        "funnel",
        "--tasks",
        str(tasks),
        "--collected",
        str(collected),
        "--filtered",
        str(filtered),
        "--exported",
        str(sft),
        "--out",
        str(runs / "report"),
    )
    markdown = (runs / "report" / "report.md").read_text()
    assert f"| generated | {len(FAMILIES)} |" in markdown
    assert f"| kept: replay | {2 * len(FAMILIES)} |" in markdown
    assert (runs / "report" / "funnel.png").stat().st_size > 10_000
