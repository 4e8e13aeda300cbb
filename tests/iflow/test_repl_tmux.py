"""The interactive terminal driven through tmux like a person: a prompt, an approval, /todo, Ctrl-C, exit."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from iflow.testing import ScriptedOpenAIServer, call, say

pytestmark = pytest.mark.skipif(
    shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)"
)

IFLOW = str(Path(sys.executable).parent / "iflow")


class Terminal:
    def __init__(self, socket: str, name: str) -> None:
        self.socket = socket
        self.name = name

    def tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=10)
        return done.stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-S", "-200", "-t", self.name)

    def send(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", self.name, *keys)

    def type_line(self, text: str) -> None:
        self.send("-l", text)
        self.send("Enter")

    def wait_for(self, text: str, after: int = 0, timeout: float = 30.0) -> str:
        """Wait until ``text`` appears at least ``after + 1`` times; returns the screen."""
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if screen.count(text) > after:
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{text!r} did not appear on the terminal within {timeout} s; screen:\n{screen}")

    def start(self, command: str) -> None:
        self.tmux("new-session", "-d", "-s", self.name, "-x", "140", "-y", "50", command)
        # Keep the pane (and what it shows) after iflow exits, or a fast exit leaves nothing to read.
        self.tmux("set-option", "-w", "-t", self.name, "remain-on-exit", "on")

    def alive(self) -> bool:
        return self.tmux("display-message", "-p", "-t", self.name, "#{pane_dead}").strip() == "0"


@pytest.fixture
def terminal() -> Iterator[Terminal]:
    socket = f"iflow-test-{uuid.uuid4().hex[:8]}"
    term = Terminal(socket, "iflow")
    yield term
    subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, timeout=10)


def test_prompt_approval_todo_interrupt_and_exit(
    git_repo: Path, iflow_home: Path, terminal: Terminal
) -> None:
    todos = [{"id": "1", "content": "write hello.txt", "status": "in_progress"}]
    script = [
        call("todo_write", "Planning first.", todos=todos),
        call("write_file", file_path="hello.txt", content="hi\n"),
        say("Wrote hello.txt."),
        call("run_shell_command", command="sleep 60"),
    ]
    with ScriptedOpenAIServer(script) as server:
        command = (
            f"cd {shlex.quote(str(git_repo))} && env IFLOW_HOME={shlex.quote(str(iflow_home))} "
            f"{shlex.quote(IFLOW)} --base-url {server.url} --model scripted-model"
        )
        terminal.start(command)
        terminal.wait_for("/help for commands")

        terminal.send("-l", "please create")
        terminal.send("M-Enter")  # Alt-Enter: a second line, not a submission
        terminal.type_line("hello.txt")
        screen = terminal.wait_for("Allow? [y]es")
        assert server.requests[0]["messages"][1]["content"].startswith("please create\nhello.txt")
        assert "Planning first." in screen and "write_file hello.txt" in screen
        assert not (git_repo / "hello.txt").exists()
        terminal.type_line("y")
        terminal.wait_for("Wrote hello.txt.")
        assert (git_repo / "hello.txt").read_text() == "hi\n"

        terminal.type_line("/todo")
        terminal.wait_for("[~] 1. write hello.txt")

        terminal.type_line("now wait a minute")
        terminal.wait_for("Allow? [y]es", after=1)
        terminal.type_line("y")
        terminal.wait_for("$ sleep 60", after=1)
        time.sleep(0.5)
        terminal.send("C-c")
        terminal.wait_for("turn ended: interrupted")

        terminal.send("C-c")  # at the prompt Ctrl-C clears the line; it does not quit
        time.sleep(0.3)
        assert terminal.alive()
        terminal.type_line("/exit")
        screen = terminal.wait_for("session saved")
        deadline = time.monotonic() + 10
        while terminal.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
    assert not terminal.alive(), "iflow did not exit after /exit"
    assert "resume with iflow -r" in screen
    history = (iflow_home / "history").read_text()
    assert "hello.txt" in history and "/todo" in history
    assert "\n+y\n" not in history, "approval answers must not enter the prompt history"
