"""The ROCK executor: the same scripted task and the same tools, inside real sandboxes of a real fleet."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from iflow.agent import TerminationReason
from iflow.executors.base import ExecutorError
from iflow.executors.rock import RockExecutor
from iflow.testing import ScriptedOpenAIServer, call, say
from iflow.todos import TodoStore
from iflow.tools import ToolContext, all_tools
from rock.fleet import LocalFleet, short_tmp
from rock.sdk import Sandbox
from tests.iflow.agent_harness import last_tool_result, make_agent

pytestmark = [pytest.mark.docker, pytest.mark.slow]
SMALL = {"cpus": 0.5, "memory": "256m"}
IFLOW = str(Path(sys.executable).parent / "iflow")
CALC = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
TOOLS = {tool.name: tool for tool in all_tools()}


@pytest.fixture(scope="module")
def fleet() -> Iterator[LocalFleet]:
    from rock.images import ensure_base_images

    ensure_base_images()
    fleet = LocalFleet(short_tmp("iflow-rock-"), f"iflow-{uuid.uuid4().hex[:6]}")
    fleet.admin.start()
    try:
        fleet.wait_for_workers()
        yield fleet
    finally:
        fleet.admin.stop()
        fleet.remove_all_containers()


def test_the_scripted_edit_runs_inside_a_sandbox(fleet: LocalFleet, tmp_path: Path) -> None:
    script = [
        call("search_file_content", "Let me find add.", pattern="def add"),
        call("read_file", file_path="calc.py"),
        call("replace", file_path="calc.py", old_string="return a - b", new_string="return a + b"),
        call("write_file", file_path="notes/CHANGELOG.md", content="- fixed add\n"),
        call("run_shell_command", command="python3 -c 'import calc; print(calc.add(2, 3))'"),
        say("Fixed add."),
    ]
    with Sandbox("python:3.11", admin_url=fleet.url, **SMALL) as sandbox:
        executor = RockExecutor(sandbox, workdir="/tmp/repo")
        sandbox.write_file("/tmp/repo/calc.py", CALC)
        with ScriptedOpenAIServer(script) as server:
            agent, _ = make_agent(server, tmp_path, executor=executor)
            result = agent.run("add(2, 3) returns -1; fix it")
            requests = server.requests
        assert result.termination is TerminationReason.COMPLETED and result.rounds == 6
        assert sandbox.read_file("/tmp/repo/calc.py").decode().startswith("def add(a, b):\n    return a + b")
        assert sandbox.read_file("/tmp/repo/notes/CHANGELOG.md") == b"- fixed add\n"
    assert last_tool_result(requests[1]) == "calc.py:1: def add(a, b):"
    assert last_tool_result(requests[5]) == "Output:\n5\nExit code: 0"
    assert "Working directory: /tmp/repo" in requests[0]["messages"][1]["content"]
    assert not (tmp_path / "calc.py").exists()


def test_every_tool_works_in_a_busybox_sandbox(fleet: LocalFleet, tmp_path: Path) -> None:
    with Sandbox("busybox", admin_url=fleet.url, **SMALL) as sandbox:
        executor = RockExecutor(sandbox, workdir="/tmp/proj")
        context = ToolContext(executor=executor, todos=TodoStore("/tmp/proj", home=tmp_path), save_memory=str)

        def use(name: str, **arguments: object) -> str:
            return TOOLS[name].run(arguments, context).output

        use("write_file", file_path="calc.py", content=CALC)
        use("write_file", file_path="docs/notes.md", content="# Notes\nadd is broken\n")
        assert use("read_file", file_path="calc.py", offset=2, limit=1).endswith("    return a - b\n")
        use("multi_edit", file_path="calc.py", edits=[{"old_string": "a - b", "new_string": "a + b"}])
        assert "return a + b" in use("read_file", file_path="calc.py")
        listing = use("list_directory").splitlines()
        assert listing[1:] == ["docs/", f"calc.py ({len(CALC)} bytes)"]
        assert use("glob", pattern="**/*.md") == "docs/notes.md"
        assert use("glob", pattern="*.py") == "calc.py"
        assert use("search_file_content", pattern=r"def \w+\(a", include="*.py").splitlines() == [
            "calc.py:1: def add(a, b):",
            "calc.py:5: def mul(a, b):",
        ]
        assert (
            use("run_shell_command", command="cd docs && export N=7") == "Output:\n(no output)\nExit code: 0"
        )
        assert use("run_shell_command", command="echo $N $(pwd)") == "Output:\n7 /tmp/proj/docs\nExit code: 0"
        timed_out = TOOLS["run_shell_command"].run(
            {"command": "echo started; sleep 30", "timeout": 1}, context
        )
        assert not timed_out.ok and "started" in timed_out.output
        with pytest.raises(ExecutorError, match="does not exist"):
            use("read_file", file_path="missing.py")
        before = executor.fingerprints(["calc.py", "gone.py"])
        assert before["gone.py"] is None and before["calc.py"] is not None
        sandbox.run("sleep 1; echo more >> /tmp/proj/calc.py")
        assert executor.fingerprints(["calc.py"])["calc.py"] != before["calc.py"]


def test_cli_sandbox_flag_copies_the_project_in_and_leaves_the_host_alone(
    fleet: LocalFleet, git_repo: Path
) -> None:
    script = [
        call("replace", file_path="calc.py", old_string="return a - b", new_string="return a + b"),
        call("run_shell_command", command="pwd; python3 -c 'import calc; print(calc.add(2, 3))'"),
        say("Fixed inside the sandbox."),
    ]
    env = {**os.environ, "ROCK_ADMIN_URL": fleet.url}
    before = fleet.containers()
    with ScriptedOpenAIServer(script) as server:
        done = subprocess.run(
            [
                IFLOW,
                "-p",
                "fix add",
                "--yolo",
                "--sandbox",
                "python:3.11",
                "--base-url",
                server.url,
                "--model",
                "m",
            ],
            cwd=git_repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        shell_result = last_tool_result(server.requests[2])
    assert done.returncode == 0, done.stderr
    assert shell_result == f"Output:\n/tmp/workspace/{git_repo.name}\n5\nExit code: 0"
    assert "return a - b" in (git_repo / "calc.py").read_text()
    assert fleet.containers() <= before, "the CLI left its sandbox behind"
