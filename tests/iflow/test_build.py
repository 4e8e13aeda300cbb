"""An agent wired from settings, memory files, hooks and workflow files, as the CLI builds it."""

from __future__ import annotations

import json
from pathlib import Path

from iflow.agent import ApprovalMode, TerminationReason
from iflow.agent.build import AgentOptions, build_agent, build_parts
from iflow.testing import ScriptedOpenAIServer, call, say
from iflow.types import TOOL_ERROR_PREFIX
from tests.iflow.agent_harness import RecordingEvents, last_tool_result, tool_names


def options(repo: Path, server: ScriptedOpenAIServer) -> AgentOptions:
    return AgentOptions(cwd=repo, base_url=server.url, model="m", approval_mode=ApprovalMode.YOLO)


def test_pre_tool_use_hook_blocks_a_write_and_the_model_is_told(git_repo: Path) -> None:
    hook = {"matcher": "write_file|replace", "hooks": [{"command": "echo 'calc.py is frozen' >&2; exit 2"}]}
    (git_repo / ".iflow").mkdir()
    (git_repo / ".iflow" / "settings.json").write_text(json.dumps({"hooks": {"PreToolUse": [hook]}}))
    script = [call("replace", file_path="calc.py", old_string="a - b", new_string="a + b"), say("blocked")]
    with ScriptedOpenAIServer(script) as server:
        parts = build_parts(options(git_repo, server))
        agent = build_agent(parts)
        agent.run("fix it")
        told = last_tool_result(server.requests[1])
        parts.close()
    assert "return a - b" in (git_repo / "calc.py").read_text()
    assert told.startswith(TOOL_ERROR_PREFIX + "a PreToolUse hook blocked this call")
    assert "calc.py is frozen" in told


def test_post_tool_use_and_session_hooks_receive_event_json(git_repo: Path) -> None:
    log = git_repo.parent / "hook.log"
    record = {"hooks": [{"command": f"cat >> {log}; echo >> {log}"}]}
    hooks = {
        event: [record] for event in ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop", "SessionEnd")
    }
    (git_repo / ".iflow").mkdir()
    (git_repo / ".iflow" / "settings.json").write_text(json.dumps({"hooks": hooks}))
    with ScriptedOpenAIServer([call("glob", pattern="*.py"), say("done")]) as server:
        parts = build_parts(options(git_repo, server))
        agent = build_agent(parts)
        agent.run("list")
        agent.close()
        parts.close()
    events = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    assert [e["hook_event_name"] for e in events] == [
        "SessionStart",
        "UserPromptSubmit",
        "PostToolUse",
        "Stop",
        "SessionEnd",
    ]
    assert events[1]["prompt"] == "list"
    assert events[2]["tool_name"] == "glob" and events[2]["tool_input"] == {"pattern": "*.py"}
    assert "calc.py" in events[2]["tool_response"]["output"]


def test_memory_files_reach_the_system_prompt_and_save_memory_appends(
    git_repo: Path, iflow_home: Path
) -> None:
    (iflow_home / "IFLOW.md").write_text("Global rule: answer briefly.\n")
    (git_repo / "AGENTS.md").write_text("Project rule: run the tests.\n")
    with ScriptedOpenAIServer([call("save_memory", fact="The user likes kiwis."), say("saved")]) as server:
        parts = build_parts(options(git_repo, server))
        build_agent(parts).run("remember kiwis")
        system = server.requests[0]["messages"][0]["content"]
        parts.close()
    assert system.index("Global rule: answer briefly.") < system.index("Project rule: run the tests.")
    assert "The user likes kiwis." in (iflow_home / "IFLOW.md").read_text()


def test_custom_sub_agent_gets_only_its_allowed_tools(git_repo: Path) -> None:
    agents = git_repo / ".iflow" / "agents"
    agents.mkdir(parents=True)
    (agents / "finder.md").write_text(
        "---\nname: finder\ndescription: finds files\ntools: glob, read_file\nmax_turns: 3\n---\n"
        "You find files and report paths.\n"
    )
    script = [
        call("task", description="find tests", prompt="List the test files.", subagent_type="finder"),
        call("glob", pattern="test_*.py"),
        say("test_calc.py"),
        say("There is one test file."),
    ]
    events = RecordingEvents()
    with ScriptedOpenAIServer(script) as server:
        parts = build_parts(options(git_repo, server))
        result = build_agent(parts, events=events).run("what tests exist?")
        main_system = server.requests[0]["messages"][0]["content"]
        child = server.requests[1]
        parts.close()
    assert "- finder: finds files" in main_system
    assert child["messages"][0]["content"].startswith("You find files and report paths.")
    assert sorted(tool_names(child)) == ["glob", "read_file"]
    assert result.termination is TerminationReason.COMPLETED
    assert any(tool == "glob" for tool, _ in events.tools)
