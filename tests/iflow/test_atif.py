"""iflow's sessions as ATIF: the `iflow -p --trajectory` file and a saved session's export validate with the
`atif` models and give back the very messages they were made from."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import atif
import pytest

from iflow.atif import AtifError, messages_from_trajectory, read_trajectory, trajectory_from_messages
from iflow.testing import ScriptedOpenAIServer, call, say

IFLOW = str(Path(sys.executable).parent / "iflow")
FIX = {"file_path": "calc.py", "old_string": "return a - b", "new_string": "return a + b"}


def iflow(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [IFLOW, *args], cwd=repo, env=dict(os.environ), capture_output=True, text=True, timeout=120
    )


def test_messages_round_trip_through_atif_steps() -> None:
    messages = [
        {"role": "system", "content": "You are iFlow."},
        {"role": "user", "content": [{"type": "text", "text": "list it"}]},
        {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": '{"path": "."}'}},
                # Not a JSON object: kept verbatim, so training on the export sees what the model wrote.
                {"id": "c2", "type": "function", "function": {"name": "ls", "arguments": "{'bad'"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
        {"role": "tool", "tool_call_id": "c2", "content": "Error: arguments are not JSON"},
        {"role": "assistant", "content": "Done."},
    ]
    trajectory = trajectory_from_messages(messages, model_name="m", session_id="s1")
    assert [s.source for s in trajectory.steps] == ["system", "user", "agent", "agent"]
    agent = trajectory.steps[2]
    assert agent.tool_calls is not None and agent.tool_calls[0].arguments == {"path": "."}
    assert agent.observation is not None
    assert [r.source_call_id for r in agent.observation.results] == ["c1", "c2"]
    atif.Trajectory.model_validate(trajectory.to_json_dict())
    back = messages_from_trajectory(atif.Trajectory.model_validate(trajectory.to_json_dict()))
    assert back[1] == {"role": "user", "content": "list it"}  # text parts become one string
    assert back[2]["tool_calls"][1]["function"]["arguments"] == "{'bad'"
    assert back[3:] == messages[3:]


def test_iflow_p_writes_a_valid_atif_trajectory_and_exports_a_saved_session(git_repo: Path) -> None:
    script = [call("read_file", "Reading.", file_path="calc.py"), call("replace", **FIX), say("Fixed add.")]
    out = git_repo.parent / "run.atif.json"
    with ScriptedOpenAIServer(script) as server:
        done = iflow(
            git_repo, "-p", "fix add", "--yolo", "--base-url", server.url, "--model", "m",
            "--trajectory", str(out),
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    trajectory = read_trajectory(out)  # validates with the atif models
    assert trajectory.schema_version == "ATIF-v1.8" and trajectory.agent.name == "iflow"
    assert trajectory.agent.model_name == "m"
    steps = trajectory.steps
    assert steps[0].source == "system"
    assert any(s.source == "user" and "fix add" in str(s.message) for s in steps)
    agent_steps = [s for s in steps if s.source == "agent"]
    assert [c.function_name for s in agent_steps for c in s.tool_calls or []] == ["read_file", "replace"]
    replaced = agent_steps[1].observation
    assert (
        replaced is not None
        and replaced.results[0].source_call_id == agent_steps[1].tool_calls[0].tool_call_id
    )
    assert agent_steps[-1].message == "Fixed add."
    assert trajectory.final_metrics is not None and trajectory.final_metrics.total_completion_tokens > 0
    assert trajectory.extra["runs"][0]["termination_reason"] == "completed"

    # The same session exported later, without running anything.
    again = git_repo.parent / "again.json"
    done = iflow(git_repo, "--continue", "--trajectory", str(again))
    assert done.returncode == 0, done.stderr
    assert json.loads(again.read_text()) == json.loads(out.read_text())
    done = iflow(git_repo, "--resume", "no-such-session", "--trajectory", str(again))
    assert done.returncode == 2 and "no session 'no-such-session'" in done.stderr.replace("\n", "")


def test_reading_a_file_that_is_not_atif_names_the_problem(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema_version": "ATIF-v1.8", "agent": {"name": "x", "version": "1"},
                               "steps": [{"step_id": 2, "source": "user", "message": "hi"}]}))  # fmt: skip
    with pytest.raises(AtifError, match=r"(?s)bad.json is not an ATIF trajectory.*not sequential"):
        read_trajectory(bad)


def test_odd_tool_calls_from_servers_still_convert() -> None:
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "type": "function",
                    "function": {"name": "ls", "arguments": {"path": "/"}},
                },  # no id, an object
                {
                    "id": "x",
                    "type": "function",
                    "function": {"name": "ls", "arguments": "[1, 2]"},
                },  # not an object
            ],
        },
        {"role": "tool", "tool_call_id": "x", "content": "done"},
    ]
    trajectory = trajectory_from_messages(messages)  # type: ignore[arg-type]
    first, second = trajectory.steps[1].tool_calls or []
    assert first.tool_call_id == "call-1-0" and first.arguments == {"path": "/"}
    assert second.arguments == {} and second.extra == {"raw_arguments": "[1, 2]"}
    back = messages_from_trajectory(trajectory)
    assert back[1]["tool_calls"][1]["function"]["arguments"] == "[1, 2]"
