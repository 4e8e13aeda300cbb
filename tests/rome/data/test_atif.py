"""The data stage's trajectories as ATIF: `rome data export-atif` writes files the atif models accept, and
`rome data import-atif` turns ATIF from elsewhere into teacher data that `rome data export-sft` exports."""

from __future__ import annotations

import json
from pathlib import Path

import atif
from typer.testing import CliRunner

from rome.cli import app
from rome.data.types import ModelCall, write_trajectories
from tests.rome.data.transcripts import SUM, shell, transcript


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["data", *args])
    return result.exit_code, result.output


def sft_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_export_atif_then_import_gives_back_the_same_sft_data(tmp_path: Path) -> None:
    record = transcript([shell("cat /app/data/n.txt", "1\n2", code=0), shell("bad", code=127), SUM])
    tokens = {"prompt_token_ids": [1, 2, 3], "output_token_ids": [4, 5], "output_logprobs": [-0.5, -0.25]}
    record.calls = [
        ModelCall(context_messages=2 + 2 * i, response={}, weight_version=3, **tokens) for i in range(4)
    ]
    record.filters = {"heuristic": "kept"}
    source = tmp_path / "kept.jsonl"
    write_trajectories(source, [record])

    code, output = run("export-atif", str(source), "--out", str(tmp_path / "atif"), "--token-ids")
    assert code == 0, output
    (file,) = sorted((tmp_path / "atif").glob("*.json"))
    trajectory = atif.Trajectory.model_validate_json(file.read_text())
    assert trajectory.extra is not None and trajectory.extra["task_id"] == "t"
    assert trajectory.extra["reward"] == 1.0 and trajectory.extra["filters"] == {"heuristic": "kept"}
    agent_steps = [s for s in trajectory.steps if s.source == "agent"]
    assert len(agent_steps) == 4
    metrics = agent_steps[0].metrics
    assert (
        metrics is not None and metrics.completion_token_ids == [4, 5] and metrics.logprobs == [-0.5, -0.25]
    )
    assert metrics.extra == {"weight_version": 3, "finish_reason": None}

    code, output = run("import-atif", str(tmp_path / "atif"), "--out", str(tmp_path / "imported.jsonl"))
    assert code == 0, output
    assert "1 trajectories (1 verified)" in output
    for name in ("kept", "imported"):
        code, output = run(
            "export-sft", str(tmp_path / f"{name}.jsonl"), "--out", str(tmp_path / f"{name}.sft")
        )
        assert code == 0, output
    original, imported = sft_lines(tmp_path / "kept.sft"), sft_lines(tmp_path / "imported.sft")
    assert imported[0]["messages"] == original[0]["messages"]
    assert [m["error"] for m in imported[0]["messages"] if m["role"] == "assistant"] == [
        False,
        True,
        False,
        False,
    ]
    assert imported[0]["tools"] == original[0]["tools"]


def test_atif_from_another_agent_feeds_export_sft(tmp_path: Path) -> None:
    """A trajectory another agent wrote: commands as tool calls, one output with no call (a system event)."""
    other = atif.Trajectory(
        schema_version="ATIF-v1.8",
        session_id="other-1",
        agent=atif.Agent(name="terminus", version="2.0", model_name="big-model"),
        steps=[
            atif.Step(step_id=1, source="user", message="Write 3 to /app/answer.txt."),
            atif.Step(
                step_id=2,
                source="agent",
                message="Writing it.",
                tool_calls=[
                    atif.ToolCall(
                        tool_call_id="k1",
                        function_name="run_shell_command",
                        arguments={"command": "echo 3 > /app/answer.txt"},
                    )
                ],
                observation=atif.Observation(
                    results=[atif.ObservationResult(source_call_id="k1", content="Exit code: 0")]
                ),
            ),
            atif.Step(step_id=3, source="agent", message="Done."),
        ],
        extra={"reward": 1.0},
    )
    folder = tmp_path / "harbor-run" / "answer-task__0" / "agent"
    folder.mkdir(parents=True)
    (folder / "trajectory.json").write_text(json.dumps(other.to_json_dict()))
    (tmp_path / "not-atif.json").write_text('{"steps": []}')

    code, output = run("import-atif", str(tmp_path / "not-atif.json"), "--out", str(tmp_path / "x.jsonl"))
    assert code == 2 and "not-atif.json is not an ATIF trajectory" in output.replace("\n", "")

    code, output = run("import-atif", str(tmp_path / "harbor-run"), "--out", str(tmp_path / "teacher.jsonl"))
    assert code == 0, output
    record = json.loads((tmp_path / "teacher.jsonl").read_text())
    assert record["task_id"] == "answer-task__0" and record["agent"] == "atif:terminus"
    assert record["instruction"] == "Write 3 to /app/answer.txt." and record["verifier"]["passed"] is True
    code, output = run("export-sft", str(tmp_path / "teacher.jsonl"), "--out", str(tmp_path / "sft.jsonl"))
    assert code == 0, output
    (example,) = sft_lines(tmp_path / "sft.jsonl")
    assert [m["role"] for m in example["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert json.loads(example["messages"][1]["tool_calls"][0]["function"]["arguments"]) == {
        "command": "echo 3 > /app/answer.txt"
    }
