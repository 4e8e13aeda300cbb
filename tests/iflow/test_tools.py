"""Every tool on the local executor, in a real temporary repository."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from iflow.executors.base import ExecutorError, glob_to_regex, match_glob
from iflow.executors.local import LocalExecutor
from iflow.todos import TodoStore
from iflow.tools import ToolContext, ToolError, ToolResult, all_tools
from iflow.types import EXIT_CODE_PATTERN, TOOL_ERROR_PREFIX

TOOLS = {tool.name: tool for tool in all_tools()}


@pytest.fixture
def context(git_repo: Path) -> ToolContext:
    executor = LocalExecutor(git_repo, output_cap=2_000)
    saved: list[str] = []

    def save(fact: str) -> str:
        saved.append(fact)
        return "memory file"

    yield ToolContext(executor=executor, todos=TodoStore(str(git_repo)), save_memory=save, shell_timeout_s=30)
    executor.close()


def use(context: ToolContext, name: str, **arguments: Any) -> ToolResult:
    TOOLS[name].check_arguments(arguments)
    return TOOLS[name].run(arguments, context)


def test_every_tool_has_a_valid_schema() -> None:
    assert set(TOOLS) == {
        "run_shell_command",
        "read_file",
        "write_file",
        "replace",
        "multi_edit",
        "list_directory",
        "glob",
        "search_file_content",
        "todo_write",
        "todo_read",
        "save_memory",
        "task",
    }
    for tool in TOOLS.values():
        schema = tool.schema()
        assert schema["type"] == "function" and schema["function"]["name"] == tool.name
        parameters = schema["function"]["parameters"]
        assert parameters["type"] == "object"
        assert set(parameters["required"]) <= set(parameters["properties"])


def test_argument_check_names_missing_unknown_and_mistyped() -> None:
    with pytest.raises(ToolError, match="needs the argument"):
        TOOLS["read_file"].check_arguments({})
    with pytest.raises(ToolError, match="has no argument"):
        TOOLS["read_file"].check_arguments({"file_path": "a", "lines": 3})
    with pytest.raises(ToolError, match="must be of JSON type integer"):
        TOOLS["read_file"].check_arguments({"file_path": "a", "offset": "third"})
    quoted = {"file_path": "a", "offset": "3"}
    TOOLS["read_file"].check_arguments(quoted)
    assert quoted == {"file_path": "a", "offset": 3}


def test_read_file_whole_and_range(context: ToolContext, git_repo: Path) -> None:
    (git_repo / "long.txt").write_text("".join(f"line {i}\n" for i in range(1, 101)))
    assert use(context, "read_file", file_path="calc.py").output.startswith("def add(a, b):")
    ranged = use(context, "read_file", file_path="long.txt", offset=10, limit=3).output
    assert ranged.splitlines() == [
        "[long.txt: lines 10-12 of 100; use offset/limit to read more]",
        "line 10",
        "line 11",
        "line 12",
    ]
    with pytest.raises(ToolError, match="past the end"):
        use(context, "read_file", file_path="long.txt", offset=500)
    with pytest.raises(ExecutorError, match="does not exist"):
        use(context, "read_file", file_path="missing.py")


def test_paths_outside_the_working_directory_are_refused(context: ToolContext, git_repo: Path) -> None:
    with pytest.raises(ExecutorError, match="outside the working directory"):
        use(context, "read_file", file_path="../escape.txt")
    with pytest.raises(ExecutorError, match="outside the working directory"):
        use(context, "write_file", file_path="/etc/iflow-test", content="x")
    assert not (git_repo.parent / "escape.txt").exists()


def test_write_file_creates_folders(context: ToolContext, git_repo: Path) -> None:
    result = use(context, "write_file", file_path="pkg/new/mod.py", content="x = 1\n")
    assert result.output == "Created pkg/new/mod.py (1 lines)." and result.modified_paths == [
        "pkg/new/mod.py"
    ]
    assert (git_repo / "pkg/new/mod.py").read_text() == "x = 1\n"
    assert use(context, "write_file", file_path="pkg/new/mod.py", content="y = 2\n").output.startswith(
        "Overwrote"
    )


def test_replace_needs_a_unique_exact_match(context: ToolContext, git_repo: Path) -> None:
    use(context, "replace", file_path="calc.py", old_string="return a - b", new_string="return a + b")
    assert "return a + b" in (git_repo / "calc.py").read_text()
    with pytest.raises(ToolError, match="not found"):
        use(context, "replace", file_path="calc.py", old_string="return a - b", new_string="x")
    with pytest.raises(ToolError, match=r"matches 2 times.*expected_replacements to 2"):
        use(context, "replace", file_path="calc.py", old_string="(a, b)", new_string="(x, y)")
    use(
        context,
        "replace",
        file_path="calc.py",
        old_string="(a, b)",
        new_string="(x, y)",
        expected_replacements=2,
    )
    assert (git_repo / "calc.py").read_text().count("(x, y)") == 2


def test_multi_edit_is_all_or_nothing(context: ToolContext, git_repo: Path) -> None:
    before = (git_repo / "calc.py").read_text()
    with pytest.raises(ToolError, match=r"edit 2 of 2.*not changed"):
        use(
            context,
            "multi_edit",
            file_path="calc.py",
            edits=[
                {"old_string": "a - b", "new_string": "a + b"},
                {"old_string": "does not exist", "new_string": "x"},
            ],
        )
    assert (git_repo / "calc.py").read_text() == before
    use(
        context,
        "multi_edit",
        file_path="calc.py",
        edits=[
            {"old_string": "a - b", "new_string": "a + b"},
            {"old_string": "def mul", "new_string": "def multiply"},
        ],
    )
    assert (git_repo / "calc.py").read_text() == before.replace("a - b", "a + b").replace(
        "def mul", "def multiply"
    )


def test_list_directory_glob_and_search(context: ToolContext, git_repo: Path) -> None:
    listing = use(context, "list_directory").output.splitlines()
    assert listing[0] == "Directory .:" and "docs/" in listing and ".git/" in listing
    assert any(line.startswith("calc.py (") for line in listing)
    assert use(context, "glob", pattern="*.py").output.splitlines() == ["calc.py", "test_calc.py"]
    assert use(context, "glob", pattern="**/*.md").output == "docs/notes.md"
    assert use(context, "glob", pattern="*.md", path="docs").output == "docs/notes.md"
    found = use(context, "search_file_content", pattern=r"def \w+\(a", include="*.py").output.splitlines()
    assert found == ["calc.py:1: def add(a, b):", "calc.py:5: def mul(a, b):"]
    assert use(context, "search_file_content", pattern="broken").output == "docs/notes.md:2: add is broken"
    assert "No matches" in use(context, "search_file_content", pattern="zzz_nothing").output


def test_python_search_matches_ripgrep_when_both_exist(
    context: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    if shutil.which("rg") is None:
        pytest.skip("ripgrep is not installed; the Python search is covered by the test above")
    with_rg = use(context, "search_file_content", pattern="add", include="*.py").output
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert use(context, "search_file_content", pattern="add", include="*.py").output == with_rg


def test_glob_semantics() -> None:
    assert glob_to_regex("src/**/test_*.{js,ts}").match("src/a/b/test_x.ts")
    assert not glob_to_regex("*.py").match("pkg/a.py")
    assert match_glob("**/*.py", ["a.py", "pkg/b.py", "c.txt"]) == ["a.py", "pkg/b.py"]


def test_shell_keeps_directory_and_exported_variables(context: ToolContext, git_repo: Path) -> None:
    first = use(context, "run_shell_command", command="cd docs && export GREETING=hello && pwd")
    assert first.ok and first.output.splitlines()[-1] == "Exit code: 0"
    second = use(context, "run_shell_command", command="pwd; echo $GREETING; ls")
    assert second.output.splitlines()[1:4] == [str(git_repo / "docs"), "hello", "notes.md"]


def test_shell_reports_failures_with_the_exit_code(context: ToolContext) -> None:
    result = use(context, "run_shell_command", command="echo oops >&2; exit 3")
    assert not result.ok
    assert "oops" in result.output
    match = EXIT_CODE_PATTERN.search(result.output)
    assert match is not None and match.group(1) == "3"


def test_shell_timeout_kills_the_whole_process_group(context: ToolContext, git_repo: Path) -> None:
    script = "sleep 60 & echo $! > child.pid; echo started; wait"
    result = use(context, "run_shell_command", command=script, timeout=1)
    assert not result.ok and result.output.startswith(TOOL_ERROR_PREFIX) and "started" in result.output
    child = int((git_repo / "child.pid").read_text())
    for _ in range(50):
        if not _alive(child):
            break
        time.sleep(0.05)
    assert not _alive(child)


def test_shell_output_is_capped_keeping_head_and_tail(context: ToolContext) -> None:
    result = use(context, "run_shell_command", command="seq 1 5000")
    assert "characters omitted" in result.output and "cut in the middle" in result.output
    assert result.output.startswith("Output:\n1\n2\n") and "4999\n5000\n(output was cut" in result.output
    assert result.output.endswith("Exit code: 0")


def test_todos_persist_per_project(context: ToolContext, git_repo: Path, tmp_path: Path) -> None:
    todos = [
        {"id": "1", "content": "fix add", "status": "in_progress"},
        {"id": "2", "content": "test", "status": "pending"},
    ]
    assert "[~] 1. fix add" in use(context, "todo_write", todos=todos).output
    assert TodoStore(str(git_repo)).load() == todos
    assert use(context, "todo_read").output == "[~] 1. fix add\n[ ] 2. test"
    assert TodoStore(str(tmp_path / "other")).load() == []
    with pytest.raises(ToolError, match="status 'done'"):
        use(context, "todo_write", todos=[{"id": "1", "content": "x", "status": "done"}])


def test_save_memory_and_task_without_a_parent(context: ToolContext) -> None:
    assert "Saved to memory (memory file)" in use(context, "save_memory", fact="The user prefers tabs").output
    with pytest.raises(ToolError, match="sub-agents cannot start sub-agents"):
        use(context, "task", description="d", prompt="p")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    return status.exists() and status.read_text().split()[2] != "Z"
