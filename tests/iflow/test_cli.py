"""`iflow -p` as a user runs it: a real process, a scripted model on loopback, a real repository."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iflow.sessions import SessionStore
from iflow.testing import ScriptedOpenAIServer, call, say

IFLOW = str(Path(sys.executable).parent / "iflow")
FIX = {"file_path": "calc.py", "old_string": "return a - b", "new_string": "return a + b"}


def iflow(repo: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [IFLOW, *args],
        cwd=repo,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
        input=stdin,
    )


def test_non_interactive_run_edits_and_writes_the_output_file(git_repo: Path, iflow_home: Path) -> None:
    script = [call("read_file", "Reading.", file_path="calc.py"), call("replace", **FIX), say("Fixed add.")]
    with ScriptedOpenAIServer(script) as server:
        out = git_repo.parent / "result.json"
        done = iflow(
            git_repo,
            "-p",
            "fix add",
            "--yolo",
            "--base-url",
            server.url,
            "--model",
            "m",
            "--output-file",
            str(out),
        )
    assert done.returncode == 0, done.stderr
    assert "return a + b" in (git_repo / "calc.py").read_text()
    assert done.stdout.startswith("Reading.") and "Fixed add." in done.stdout
    assert "replace in calc.py" in done.stderr
    result = json.loads(out.read_text())
    assert result["termination_reason"] == "completed" and result["rounds"] == 3
    assert (
        result["usage"]["total_tokens"]
        == result["usage"]["prompt_tokens"] + result["usage"]["completion_tokens"]
    )
    assert result["usage"]["total_tokens"] > 0 and result["time_s"] >= 0
    session_file = iflow_home / "sessions" / f"{result['session_id']}.jsonl"
    assert Path(result["session_file"]) == session_file
    records = [json.loads(line) for line in session_file.read_text().splitlines()]
    assert records[0]["type"] == "session" and records[0]["cwd"] == str(git_repo)
    assert records[-1]["type"] == "result" and records[-1]["termination_reason"] == "completed"
    assert any(r["type"] == "message" and r["message"]["role"] == "tool" for r in records)


def test_max_turns_flag_names_the_termination(git_repo: Path) -> None:
    with ScriptedOpenAIServer([call("list_directory")] * 3) as server:
        out = git_repo.parent / "result.json"
        done = iflow(
            git_repo,
            "-p",
            "loop",
            "--yolo",
            "--max-turns",
            "2",
            "--base-url",
            server.url,
            "--model",
            "m",
            "--output-file",
            str(out),
        )
    assert done.returncode == 1
    assert json.loads(out.read_text())["termination_reason"] == "max_turns"
    assert "max_turns: 2 rounds" in done.stderr


def test_continue_and_resume_carry_the_history(git_repo: Path) -> None:
    script = [say("First answer."), say("Second answer."), say("Third answer.")]
    with ScriptedOpenAIServer(script) as server:
        common = ["--base-url", server.url, "--model", "m"]
        first = iflow(git_repo, "-p", "remember the word kiwi", *common)
        session_id = SessionStore().list(str(git_repo))[0].id
        second = iflow(git_repo, "-c", "-p", "what was the word?", *common)
        third = iflow(git_repo, "-r", session_id, "-p", "and again?", *common)
        requests = server.requests
    assert first.returncode == second.returncode == third.returncode == 0
    contents = [m["content"] for m in requests[1]["messages"]]
    assert contents[1].startswith("remember the word kiwi") and contents[2] == "First answer."
    assert contents[3].startswith("what was the word?")
    assert [m["content"] for m in requests[2]["messages"]][4] == "Second answer."
    assert len(SessionStore().list(str(git_repo))) == 1
    listed = iflow(git_repo, "--list-sessions")
    assert listed.stdout.startswith(session_id) and "remember the word kiwi" in listed.stdout


def test_settings_file_provides_the_model(git_repo: Path, iflow_home: Path) -> None:
    with ScriptedOpenAIServer([say("configured")], api_key="secret") as server:
        settings = {"baseUrl": server.url, "modelName": "from-settings", "apiKey": "secret"}
        (iflow_home / "settings.json").write_text(json.dumps(settings))
        done = iflow(git_repo, "-p", "hello")
        assert server.requests[0]["model"] == "from-settings"
    assert done.returncode == 0 and done.stdout.strip() == "configured"


def test_prompt_from_stdin(git_repo: Path) -> None:
    with ScriptedOpenAIServer([say("piped")]) as server:
        done = iflow(git_repo, "--base-url", server.url, "--model", "m", stdin="task from a pipe\n")
        assert server.requests[0]["messages"][1]["content"].startswith("task from a pipe")
    assert done.returncode == 0 and "piped" in done.stdout


def test_clear_errors_for_missing_configuration_and_sessions(git_repo: Path) -> None:
    missing = iflow(git_repo, "-p", "x")
    assert missing.returncode == 2 and "no model endpoint is configured" in missing.stderr
    assert "--base-url" in missing.stderr
    unknown = iflow(git_repo, "-r", "nope", "-p", "x", "--base-url", "http://127.0.0.1:9/v1", "--model", "m")
    assert unknown.returncode == 2 and "no session 'nope'" in unknown.stderr
    mode = iflow(git_repo, "-p", "x", "--approval-mode", "sometimes")
    assert mode.returncode == 2 and "not one of default, auto-edit, yolo, plan" in mode.stderr


def test_wrong_key_and_unreachable_endpoint_end_cleanly(git_repo: Path) -> None:
    with ScriptedOpenAIServer([say("never")], api_key="right") as server:
        out = git_repo.parent / "result.json"
        done = iflow(
            git_repo,
            "-p",
            "x",
            "--base-url",
            server.url,
            "--model",
            "m",
            "--api-key",
            "wrong",
            "--output-file",
            str(out),
        )
    assert done.returncode == 1 and "rejected the API key" in done.stderr
    assert json.loads(out.read_text())["termination_reason"] == "llm_error"


@pytest.mark.slow
def test_sigterm_ends_the_run_as_interrupted_and_still_reports(git_repo: Path) -> None:
    marker = git_repo / "started"
    script = [call("run_shell_command", command=f"touch {marker}; sleep 60")]
    with ScriptedOpenAIServer(script) as server:
        out = git_repo.parent / "result.json"
        args = ["-p", "wait", "--yolo", "--base-url", server.url, "--model", "m", "--output-file", str(out)]
        process = subprocess.Popen(
            [IFLOW, *args], cwd=git_repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for _ in range(600):
            if marker.exists():
                break
            time.sleep(0.1)
        process.terminate()
        process.communicate(timeout=60)
    assert process.returncode == 1
    result = json.loads(out.read_text())
    assert result["termination_reason"] == "interrupted" and result["rounds"] == 1
