"""The oracle teacher: its plans, its replies, and iFlow's own client reading them from its endpoint."""

from __future__ import annotations

import json
from pathlib import Path

from iflow.llm import LLMClient, LLMConfig
from iflow.tools.shell import RunShellCommand
from rome.data.taskset import generate
from rome.data.teacher import TeacherServer, Turn, plan, reply


def task(tmp_path: Path, family: str = "fix-bug", level: int = 2) -> Path:
    generate(family, 1, 5, tmp_path, {"level": level})
    return tmp_path / f"{family}-5"


def test_plan_replays_the_steps_then_answers(tmp_path: Path) -> None:
    folder = task(tmp_path)
    steps = json.loads((folder / "solution" / "steps.json").read_text())["steps"]
    turns = plan(folder, 0, mistake_rate=0.0)
    assert [t.command for t in turns[:-1]] == [s["command"] for s in steps]
    assert turns[-1].command is None and not any(t.mistake for t in turns)
    assert plan(folder, 0, 0.0) == turns


def test_with_rate_one_every_attempt_makes_one_mistake_before_its_step(tmp_path: Path) -> None:
    folder = task(tmp_path)
    spec = json.loads((folder / "solution" / "steps.json").read_text())
    [mistake] = spec["mistakes"]
    for attempt in range(3):
        turns = plan(folder, attempt, mistake_rate=1.0)
        assert [t.mistake for t in turns].count(True) == 1
        assert turns[mistake["before"]] == Turn(mistake["command"], mistake["description"], True)
        assert turns[mistake["before"] + 1].command == spec["steps"][mistake["before"]]["command"]


def test_a_task_without_steps_json_replays_its_solve_script(tmp_path: Path) -> None:
    folder = task(tmp_path)
    (folder / "solution" / "steps.json").unlink()
    (folder / "solution" / "solve.sh").write_text(
        "#!/bin/bash\nset -e\ncd /app\nfor f in a b; do\n  echo $f\ndone\n"
    )
    assert [t.command for t in plan(folder, 0, 1.0)] == ["cd /app", "for f in a b; do\n  echo $f\ndone", None]


def test_the_reply_after_a_failed_call_says_it_failed() -> None:
    turns = [Turn("ls /nope", "look", True), Turn("ls /app", "list the app"), Turn(None, "Done.")]
    first = reply(turns, [{"role": "user", "content": "go"}])["choices"][0]
    assert first["finish_reason"] == "tool_calls"
    assert json.loads(first["message"]["tool_calls"][0]["function"]["arguments"]) == {
        "command": "ls /nope",
        "description": "look",
    }
    history = [
        {"role": "user", "content": "go"},
        first["message"],
        {"role": "tool", "tool_call_id": "call_0", "content": "Output:\nls: cannot access\nExit code: 2"},
        {"role": "user", "content": "<system-reminder>the call failed</system-reminder>"},
    ]
    second = reply(turns, history)["choices"][0]["message"]
    assert second["content"] == "That failed (exit code 2). List the app."
    history += [second, {"role": "tool", "tool_call_id": "call_1", "content": "Output:\nx\nExit code: 0"}]
    last = reply(turns, history)["choices"][0]
    assert last["message"] == {"role": "assistant", "content": "Done."} and last["finish_reason"] == "stop"


def test_under_the_compact_profile_a_call_carries_only_what_the_schema_shows() -> None:
    turns = [Turn("ls /app", "list the app"), Turn(None, "Done.")]
    message = reply(turns, [{"role": "user", "content": "go"}], "compact")["choices"][0]["message"]
    shown = RunShellCommand("compact").schema()["function"]["parameters"]["properties"]
    arguments = json.loads(message["tool_calls"][0]["function"]["arguments"])
    assert arguments == {"command": "ls /app"} and set(arguments) <= set(shown)
    assert message["content"] == "List the app."


def test_iflows_client_reads_the_teachers_stream_as_a_tool_call() -> None:
    turns = [Turn("wc -l < /app/a.txt > /app/answer.txt", "count the lines"), Turn(None, "Done.")]
    with TeacherServer() as teacher:
        teacher.register("oracle-teacher/t1", turns)
        client = LLMClient(LLMConfig(base_url=teacher.url, model="oracle-teacher/t1", max_retries=0))
        try:
            answer = client.complete([{"role": "user", "content": "count"}], [RunShellCommand().schema()])
        finally:
            client.close()
    assert answer.content == "Count the lines."
    [call] = answer.tool_calls
    assert call.name == "run_shell_command"
    assert call.arguments == {
        "command": "wc -l < /app/a.txt > /app/answer.txt",
        "description": "count the lines",
    }
