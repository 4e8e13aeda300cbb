"""The agent loop driven by a scripted model on loopback, editing a real temporary git repository."""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path

from iflow.agent import ApprovalMode, Decision, TerminationReason, deny_all
from iflow.agent.approval import INTERACTIVE_DENIAL, NON_INTERACTIVE_DENIAL, PLAN_REFUSAL
from iflow.testing import ScriptedOpenAIServer, call, calls, error, say, text_call
from iflow.types import TOOL_ERROR_PREFIX
from tests.iflow.agent_harness import RecordingApprover, last_tool_result, make_agent, tool_names

FIX = {"file_path": "calc.py", "old_string": "return a - b", "new_string": "return a + b"}


def test_multi_step_edit_changes_the_files_and_verifies(git_repo: Path) -> None:
    script = [
        call("search_file_content", "Let me find add.", pattern="def add"),
        call("read_file", file_path="calc.py"),
        call("replace", **FIX),
        call("write_file", file_path="CHANGELOG.md", content="- fixed add\n"),
        call("run_shell_command", command="python3 -c 'import calc; print(calc.add(2, 3))'"),
        say("Fixed add: it subtracted. 2 + 3 now gives 5."),
    ]
    with ScriptedOpenAIServer(script) as server:
        agent, events = make_agent(server, git_repo)
        result = agent.run("add(2, 3) returns -1; fix it")
        requests = server.requests
    assert result.termination is TerminationReason.COMPLETED
    assert result.rounds == 6
    assert result.final_text == "Fixed add: it subtracted. 2 + 3 now gives 5."
    assert result.usage.prompt_tokens > 0 and result.usage.completion_tokens > 0
    assert (git_repo / "calc.py").read_text().startswith("def add(a, b):\n    return a + b\n")
    assert (git_repo / "CHANGELOG.md").read_text() == "- fixed add\n"
    diff = subprocess.run(["git", "diff", "--stat"], cwd=git_repo, capture_output=True, text=True, check=True)
    assert "calc.py" in diff.stdout
    # Each request carries the previous tool result; the shell really ran the fixed code.
    assert last_tool_result(requests[1]) == "calc.py:1: def add(a, b):"
    assert "return a - b" in last_tool_result(requests[2])
    assert last_tool_result(requests[5]) == "Output:\n5\nExit code: 0"
    # The environment snapshot reminder reaches the model with the first prompt.
    first_user = requests[0]["messages"][1]["content"]
    assert first_user.startswith("add(2, 3) returns -1; fix it") and "<system-reminder>" in first_user
    assert f"Working directory: {git_repo}" in first_user and "calc.py" in first_user
    assert "".join(events.text).startswith("Let me find add.")
    roles = [m["role"] for m in agent.messages]
    assert roles[:2] == ["system", "user"] and roles[-1] == "assistant"


def test_a_fixed_environment_replaces_todays_date_and_the_machines_os(git_repo: Path) -> None:
    """Training runs fix what the environment reminder states, so a task's prompt is the same on every day and
    machine; without it the reminder states today's date and this machine's OS."""
    with ScriptedOpenAIServer([say("Nothing to do."), say("Nothing to do.")]) as server:
        fixed, _ = make_agent(server, git_repo, environment_date="1999-12-31", environment_os="TestOS 1")
        fixed.run("look around")
        real, _ = make_agent(server, git_repo)
        real.run("look around")
        requests = server.requests
    stated = [request["messages"][1]["content"] for request in requests]
    assert "Date: 1999-12-31\nOS: TestOS 1\n" in stated[0]
    assert f"OS: {platform.system()} {platform.release()}\n" in stated[1] and "1999-12-31" not in stated[1]


def test_several_calls_in_one_reply_run_in_order(git_repo: Path) -> None:
    script = [
        calls(("write_file", {"file_path": "a.txt", "content": "1"}), ("read_file", {"file_path": "a.txt"})),
        say("done"),
    ]
    with ScriptedOpenAIServer(script) as server:
        agent, _ = make_agent(server, git_repo)
        agent.run("go")
        tool_messages = [m for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == ["Created a.txt (1 lines).", "1"]


def test_max_turns_ends_the_run(git_repo: Path) -> None:
    with ScriptedOpenAIServer([call("list_directory")] * 5) as server:
        agent, _ = make_agent(server, git_repo, max_turns=3)
        result = agent.run("loop")
        assert len(server.requests) == 3
    assert result.termination is TerminationReason.MAX_TURNS and result.rounds == 3
    # The history stays valid: every tool call has its result.
    assert agent.messages[-1]["role"] == "tool"


def test_max_tokens_ends_the_run(git_repo: Path) -> None:
    with ScriptedOpenAIServer([call("list_directory")] * 5) as server:
        agent, _ = make_agent(server, git_repo, max_tokens=50)
        result = agent.run("loop")
    assert result.termination is TerminationReason.MAX_TOKENS
    assert result.rounds == 1 and result.usage.total_tokens >= 50


def test_max_time_ends_the_run(git_repo: Path) -> None:
    with ScriptedOpenAIServer([say("never sent")]) as server:
        agent, _ = make_agent(server, git_repo, max_time_s=0)
        result = agent.run("anything")
        assert server.requests == []
    assert result.termination is TerminationReason.MAX_TIME and result.rounds == 0


def test_endpoint_failure_ends_with_llm_error(git_repo: Path) -> None:
    with ScriptedOpenAIServer([call("list_directory"), error(503, "overloaded")]) as server:
        agent, events = make_agent(server, git_repo)
        result = agent.run("go")
    assert result.termination is TerminationReason.LLM_ERROR
    assert result.rounds == 1 and "HTTP 503" in (result.error or "")
    assert any("overloaded" in notice for notice in events.notices)


def test_default_mode_asks_before_shell_and_writes_only(git_repo: Path) -> None:
    approver = RecordingApprover([Decision.DENY, Decision.ALLOW])
    script = [
        call("read_file", file_path="calc.py"),
        call("write_file", file_path="new.txt", content="x"),
        call("replace", **FIX),
        say("ok"),
    ]
    with ScriptedOpenAIServer(script) as server:
        agent, _ = make_agent(server, git_repo, approver=approver, approval_mode=ApprovalMode.DEFAULT)
        agent.run("go")
        denied = last_tool_result(server.requests[2])
    assert [request.tool for request in approver.asked] == ["write_file", "replace"]
    assert denied == TOOL_ERROR_PREFIX + INTERACTIVE_DENIAL
    assert not (git_repo / "new.txt").exists()
    assert "return a + b" in (git_repo / "calc.py").read_text()


def test_allow_always_covers_later_calls_of_that_tool(git_repo: Path) -> None:
    approver = RecordingApprover([Decision.ALLOW_ALWAYS])
    script = [
        call("run_shell_command", command="echo 1"),
        call("run_shell_command", command="echo 2"),
        say("ok"),
    ]
    with ScriptedOpenAIServer(script) as server:
        agent, _ = make_agent(server, git_repo, approver=approver, approval_mode=ApprovalMode.DEFAULT)
        agent.run("go")
        assert last_tool_result(server.requests[2]) == "Output:\n2\nExit code: 0"
    assert len(approver.asked) == 1


def test_auto_edit_mode_writes_freely_but_asks_for_shell(git_repo: Path) -> None:
    approver = RecordingApprover([Decision.DENY])
    script = [call("replace", **FIX), call("run_shell_command", command="touch ran"), say("ok")]
    with ScriptedOpenAIServer(script) as server:
        agent, _ = make_agent(server, git_repo, approver=approver, approval_mode=ApprovalMode.AUTO_EDIT)
        agent.run("go")
    assert [request.tool for request in approver.asked] == ["run_shell_command"]
    assert "return a + b" in (git_repo / "calc.py").read_text()
    assert not (git_repo / "ran").exists()


def test_yolo_mode_never_asks(git_repo: Path) -> None:
    approver = RecordingApprover()
    script = [call("run_shell_command", command="touch ran"), call("replace", **FIX), say("ok")]
    with ScriptedOpenAIServer(script) as server:
        agent, _ = make_agent(server, git_repo, approver=approver, approval_mode=ApprovalMode.YOLO)
        agent.run("go")
    assert approver.asked == [] and (git_repo / "ran").exists()


def test_plan_mode_is_read_only(git_repo: Path) -> None:
    approver = RecordingApprover([Decision.ALLOW] * 3)
    script = [call("read_file", file_path="calc.py"), call("replace", **FIX), say("Plan: change - to +.")]
    with ScriptedOpenAIServer(script) as server:
        agent, _ = make_agent(server, git_repo, approver=approver, approval_mode=ApprovalMode.PLAN)
        result = agent.run("plan the fix")
        offered = tool_names(server.requests[0])
        refused = last_tool_result(server.requests[2])
    assert "read_file" in offered and "glob" in offered
    assert not {"write_file", "replace", "multi_edit", "run_shell_command"} & set(offered)
    assert refused == TOOL_ERROR_PREFIX + PLAN_REFUSAL
    assert "return a - b" in (git_repo / "calc.py").read_text()
    assert approver.asked == [] and result.termination is TerminationReason.COMPLETED


def test_non_interactive_runs_refuse_what_needs_approval(git_repo: Path) -> None:
    with ScriptedOpenAIServer([call("write_file", file_path="x", content="y"), say("ok")]) as server:
        agent, _ = make_agent(server, git_repo, approver=deny_all, approval_mode=ApprovalMode.DEFAULT)
        agent.run("go")
        assert last_tool_result(server.requests[1]) == TOOL_ERROR_PREFIX + NON_INTERACTIVE_DENIAL
    assert not (git_repo / "x").exists()


def test_text_fallback_tool_calls_drive_the_same_edit(git_repo: Path) -> None:
    script = [
        text_call("read_file", "Reading first.\n", file_path="calc.py"),
        text_call("replace", **FIX),
        say("Fixed."),
    ]
    with ScriptedOpenAIServer(script) as server:
        agent, events = make_agent(server, git_repo, tool_format="text")
        result = agent.run("fix add")
        second = server.requests[1]
    assert result.termination is TerminationReason.COMPLETED and result.rounds == 3
    assert "return a + b" in (git_repo / "calc.py").read_text()
    assert "tools" not in second
    assert second["messages"][-1]["role"] == "user"
    assert second["messages"][-1]["content"].startswith('<tool_response name="read_file">\ndef add(a, b):')
    assert "<tool_call>" not in "".join(events.text)


def test_failed_tools_and_unknown_tools_are_reported_to_the_model(git_repo: Path) -> None:
    script = [
        call("replace", file_path="calc.py", old_string="nope", new_string="x"),
        call("no_such_tool"),
        call("read_file", path="calc.py"),
        say("giving up"),
    ]
    with ScriptedOpenAIServer(script) as server:
        agent, _ = make_agent(server, git_repo)
        agent.run("go")
        after_failure = server.requests[1]["messages"]
        unknown = last_tool_result(server.requests[2])
        bad_arguments = last_tool_result(server.requests[3])
    assert after_failure[-2]["content"].startswith(TOOL_ERROR_PREFIX + "old_string was not found in calc.py")
    assert after_failure[-1]["role"] == "user" and "did NOT succeed" in after_failure[-1]["content"]
    assert unknown.startswith(TOOL_ERROR_PREFIX + "there is no tool 'no_such_tool'")
    assert "read_file needs the argument(s) file_path" in bad_arguments


def test_repeated_identical_calls_get_a_loop_reminder(git_repo: Path) -> None:
    script = [call("list_directory", path="docs")] * 5 + [say("stopping")]
    with ScriptedOpenAIServer(script) as server:
        agent, events = make_agent(server, git_repo)
        agent.run("go")
        reminded = server.requests[5]["messages"][-1]["content"]
    assert "You have made the same call 5 times in a row" in reminded
    assert any("loop detected" in notice for notice in events.notices)


def test_files_changed_between_prompts_are_reported(git_repo: Path) -> None:
    script = [call("read_file", file_path="calc.py"), say("read it"), say("noted")]
    with ScriptedOpenAIServer(script) as server:
        agent, _ = make_agent(server, git_repo)
        agent.run("read calc.py")
        (git_repo / "calc.py").write_text("def add(a, b):\n    return b + a + 0\n")
        agent.run("I changed it")
        latest = server.requests[2]["messages"][-1]["content"]
    assert latest.startswith("I changed it") and "calc.py was modified outside your tools" in latest


def test_task_runs_a_bounded_sub_agent_and_returns_its_summary(git_repo: Path) -> None:
    script = [
        call("task", description="find the bug", prompt="Find where add is defined."),
        call("search_file_content", pattern="def add"),
        say("add is defined in calc.py line 1 and subtracts."),
        say("The sub-agent found it."),
    ]
    with ScriptedOpenAIServer(script) as server:
        agent, _ = make_agent(server, git_repo)
        result = agent.run("investigate")
        child_first = server.requests[1]
        parent_after = server.requests[3]
    assert result.termination is TerminationReason.COMPLETED
    assert [m["role"] for m in child_first["messages"][:2]] == ["system", "user"]
    assert child_first["messages"][0]["content"].startswith("You are a sub-agent of iFlow")
    assert child_first["messages"][1]["content"].startswith("Find where add is defined.")
    assert "task" not in tool_names(child_first) and "read_file" in tool_names(child_first)
    assert last_tool_result(parent_after) == "add is defined in calc.py line 1 and subtracts."
    # The sub-agent's tokens count towards the parent's run.
    assert result.usage.total_tokens > sum(len(str(r)) for r in (server.requests[0],)) // 8


def test_sub_agent_stops_at_its_turn_limit(git_repo: Path) -> None:
    script = [call("task", description="d", prompt="p")] + [call("list_directory")] * 2 + [say("parent done")]
    with ScriptedOpenAIServer(script) as server:
        agent, _ = make_agent(server, git_repo, subagent_max_turns=2)
        agent.run("go")
        summary = last_tool_result(server.requests[3])
    assert summary.startswith("The sub-agent stopped early (max_turns) after 2 rounds.")


def test_interrupt_closes_pending_calls(git_repo: Path) -> None:
    def interrupting(request):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt

    script = [calls(("run_shell_command", {"command": "echo 1"}), ("read_file", {"file_path": "calc.py"}))]
    with ScriptedOpenAIServer(script) as server:
        agent, _ = make_agent(server, git_repo, approver=interrupting, approval_mode=ApprovalMode.DEFAULT)
        result = agent.run("go")
    assert result.termination is TerminationReason.INTERRUPTED
    tool_results = [m for m in agent.messages if m["role"] == "tool"]
    assert len(tool_results) == 2 and all("interrupted" in m["content"] for m in tool_results)


def test_compression_summarizes_and_keeps_calls_with_results(git_repo: Path) -> None:
    (git_repo / "one.txt").write_text("first file line\n" * 400)
    (git_repo / "two.txt").write_text("second file line\n" * 400)
    script = [
        call("read_file", file_path="one.txt"),
        call("read_file", file_path="two.txt"),
        say("## Summary\nRead one.txt; it repeats one line."),
        say("continuing"),
    ]
    context = {"context_window": 4000, "keep_recent_messages": 2}
    with ScriptedOpenAIServer(script) as server:
        agent, events = make_agent(server, git_repo, context=context)
        result = agent.run("read things")
        summary_request = server.requests[2]
        after = server.requests[3]["messages"]
    assert result.termination is TerminationReason.COMPLETED
    assert "tools" not in summary_request and "<transcript>" in summary_request["messages"][-1]["content"]
    assert after[0]["role"] == "system" and "Read one.txt; it repeats one line." in after[1]["content"]
    texts = [str(m["content"]) for m in after]
    assert not any("first file line\nfirst file line" in text for text in texts)
    assert any(text.startswith("second file line") for text in texts)
    ids = {c["id"] for m in after if m["role"] == "assistant" for c in m.get("tool_calls", [])}
    assert ids and {m["tool_call_id"] for m in after if m["role"] == "tool"} == ids
    assert any("context summarized" in notice for notice in events.notices)
    assert agent.messages[: len(after)] == after
