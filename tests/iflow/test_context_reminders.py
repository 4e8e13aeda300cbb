"""Reminders and detection: when each `<system-reminder>` appears, and where."""

import json

from iflow.context import (
    detect_repeated_chunks,
    detect_tool_loop,
    environment_reminder,
    is_tool_failure,
    prepare,
)
from iflow.types import ContextConfig, ContextInputs, EnvironmentSnapshot, FileModification, Message

ENV = EnvironmentSnapshot(
    cwd="/repo",
    listing=("README.md", "src/"),
    git_status="## main\n M src/app.py",
    tools=("read_file", "write_file"),
    date="2026-11-29",
    os="Linux",
)


def call(call_id: str, name: str, arguments: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def assistant_calls(*calls: dict) -> Message:
    return {"role": "assistant", "content": None, "tool_calls": list(calls)}


def tool(call_id: str, content: str) -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def kinds(messages: list[Message], inputs: ContextInputs = ContextInputs()) -> list[str]:
    return [r.kind for r in prepare(messages, inputs=inputs).reminders]


def test_environment_snapshot_joins_the_first_user_message():
    history: list[Message] = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "fix the bug"},
    ]
    prepared = prepare(history, inputs=ContextInputs(environment=ENV))
    assert [r.kind for r in prepared.reminders] == ["environment"]
    assert len(prepared.messages) == 2
    assert prepared.messages[1]["content"] == (
        "fix the bug\n\n<system-reminder>\nThis is the environment the session started in.\n"
        "Date: 2026-11-29\nOS: Linux\nWorking directory: /repo\n"
        "Files in the working directory:\n  README.md\n  src/\n"
        "Git status:\n## main\n M src/app.py\nAvailable tools: read_file, write_file\n</system-reminder>"
    )


def test_environment_snapshot_only_at_session_start():
    history: list[Message] = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "next"},
    ]
    assert kinds(history, ContextInputs(environment=ENV)) == []


def test_environment_listing_is_capped():
    env = EnvironmentSnapshot("/r", tuple(f"f{i}" for i in range(60)), None, (), "d", "Linux")
    text = environment_reminder(env).text
    assert "  f49\n  ... and 10 more\nGit: not a git repository" in text
    assert "f50" not in text


def test_tool_failures_are_read_from_the_result():
    assert is_tool_failure(tool("a", "Error: no such file: x.py"))
    assert is_tool_failure(tool("a", "make: *** [all] Error 2\nExit code: 2"))
    assert not is_tool_failure(tool("a", "all good\nExit code: 0"))
    assert is_tool_failure(tool("a", "Output:\nkilled\nExit code: -9\n"))
    assert not is_tool_failure(tool("a", "Output:\nbuild.log says\nExit code: 1\ndone\nExit code: 0"))
    assert not is_tool_failure(tool("a", "the word Error: inside is fine"))
    assert not is_tool_failure({"role": "user", "content": "Error: not a tool"})


def test_failed_call_gets_a_did_not_succeed_reminder_in_a_new_user_message():
    history: list[Message] = [
        {"role": "user", "content": "edit"},
        assistant_calls(call("c1", "replace", "{}"), call("c2", "read_file", "{}")),
        tool("c1", "Error: old_string matched 3 times; make it unique"),
        tool("c2", "content"),
    ]
    prepared = prepare(history)
    assert [r.kind for r in prepared.reminders] == ["tool-failed"]
    added = prepared.messages[-1]
    assert added["role"] == "user"
    assert added["content"] == (
        "<system-reminder>\nThe call to replace (id c1) did NOT succeed: old_string matched 3 times; make it "
        "unique. Do not assume its effects happened; fix the cause, then retry or take another way.\n"
        "</system-reminder>"
    )
    assert prepared.messages[:-1] == history


def test_failed_command_names_its_exit_code():
    history: list[Message] = [
        {"role": "user", "content": "test"},
        assistant_calls(call("s", "run_shell_command", '{"command": "pytest"}')),
        tool("s", "Output:\n1 failed\nExit code: 1"),
    ]
    [reminder] = prepare(history).reminders
    assert "The call to run_shell_command (id s) did NOT succeed: the command failed (Exit code: 1)." in (
        reminder.text
    )


def test_todo_change_is_reminded_after_a_successful_todo_write_only():
    todos = {"todos": [{"id": "1", "content": "write tests", "status": "in_progress"}]}
    history: list[Message] = [
        {"role": "user", "content": "plan"},
        assistant_calls(call("t", "todo_write", json.dumps(todos))),
        tool("t", "saved"),
    ]
    prepared = prepare(history)
    assert [r.kind for r in prepared.reminders] == ["todo-changed"]
    assert "- [in_progress] write tests" in prepared.messages[-1]["content"]
    history[-1] = tool("t", "Error: todos[0].status must be one of pending, in_progress, completed")
    assert kinds(history) == ["tool-failed"]


def test_file_modified_comes_from_inputs():
    history: list[Message] = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
    ]
    inputs = ContextInputs(modified_files=(FileModification("src/app.py", "+1 line"),))
    prepared = prepare(history, inputs=inputs)
    assert [r.kind for r in prepared.reminders] == ["file-modified"]
    assert "src/app.py was modified outside your tools" in prepared.messages[-1]["content"]
    assert prepared.messages[-1]["content"].endswith("+1 line\n</system-reminder>")


def repeated_reads(times: int) -> list[Message]:
    history: list[Message] = [{"role": "user", "content": "look"}]
    for i in range(times):
        history += [assistant_calls(call(f"c{i}", "read_file", '{"file_path": "a"}')), tool(f"c{i}", "x")]
    return history


def test_loop_detected_at_five_identical_calls_not_four():
    assert kinds(repeated_reads(4)) == []
    assert kinds(repeated_reads(5)) == ["loop-detected"]
    loop = detect_tool_loop(repeated_reads(6), 5)
    assert loop is not None and (loop.name, loop.count) == ("read_file", 6)


def test_loop_counts_calls_not_messages_and_needs_identical_arguments():
    one_message = [
        {"role": "user", "content": "go"},
        assistant_calls(*(call(f"c{i}", "glob", '{"pattern": "*"}') for i in range(5))),
        *(tool(f"c{i}", "a") for i in range(5)),
    ]
    assert kinds(one_message) == ["loop-detected"]
    varied = repeated_reads(5)
    varied[3] = assistant_calls(call("c1", "read_file", '{"file_path": "b"}'))
    assert kinds(varied) == []
    respaced = repeated_reads(5)
    respaced[3] = assistant_calls(call("c1", "read_file", '{"file_path":"a"}'))
    assert kinds(respaced) == ["loop-detected"]


def test_a_user_message_resets_the_loop_count():
    history = [*repeated_reads(3), {"role": "user", "content": "keep going"}, *repeated_reads(2)[1:]]
    assert kinds(history) == []


def test_repeated_output_chunks():
    assert detect_repeated_chunks("I will fix it. " * 40, 50, 10) is not None
    assert detect_repeated_chunks("I will fix it. " * 30, 50, 10) is None  # 450 chars < 10 x 50
    assert detect_repeated_chunks("".join(f"line {i}\n" for i in range(200)), 50, 10) is None
    table = "```\n" + "| ok | ok | ok | ok | ok | ok | ok | ok | ok | ok |\n" * 20 + "```"
    assert detect_repeated_chunks(f"Results:\n{table}\nAll passed.", 50, 10) is None
    assert detect_repeated_chunks("```\n" + "again and again " * 60, 50, 10) is not None  # never closed
    history: list[Message] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "ok ok. " * 100},
        {"role": "user", "content": "and?"},
    ]
    assert kinds(history) == ["loop-detected"]


def test_prepare_is_idempotent_on_its_own_output():
    history: list[Message] = [
        {"role": "user", "content": "start"},
        *repeated_reads(5)[1:],
    ]
    history[-1] = tool("c4", "Error: permission denied")
    inputs = ContextInputs(modified_files=(FileModification("a"),))
    first = prepare(history, inputs=inputs)
    assert [r.kind for r in first.reminders] == ["file-modified", "tool-failed", "loop-detected"]
    second = prepare(first.messages, first.state, inputs=inputs)
    assert second.reminders == ()
    assert second.messages == first.messages


def test_loop_threshold_is_configurable():
    assert [r.kind for r in prepare(repeated_reads(3), config=ContextConfig(loop_threshold=3)).reminders] == [
        "loop-detected"
    ]


def test_no_environment_snapshot_after_a_summary():
    from iflow.context import apply_summary, build_summary_request
    from iflow.context.tokens import CharEstimateCounter

    history: list[Message] = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": "working"},
        {"role": "user", "content": "and now?"},
    ]
    request = build_summary_request(history, ContextConfig(keep_recent_messages=1), CharEstimateCounter())
    assert request is not None
    summarized, _ = apply_summary(request, "## Goal\ntask", ContextConfig(), CharEstimateCounter())
    assert [m["role"] for m in summarized] == ["system", "user", "user"]
    assert kinds(summarized, ContextInputs(environment=ENV)) == []


def test_content_parts_are_read_and_extended():
    history: list[Message] = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    prepared = prepare(history, inputs=ContextInputs(environment=ENV))
    content = prepared.messages[0]["content"]
    assert isinstance(content, list) and content[0] == {"type": "text", "text": "hi"}
    assert content[1]["text"].startswith("<system-reminder>\nThis is the environment")
    assert prepare(prepared.messages, inputs=ContextInputs(environment=ENV)).reminders == ()


def test_nothing_is_added_after_the_models_own_reply():
    history = repeated_reads(5)[:-1]  # ends with the fifth call, its result not there yet
    prepared = prepare(history, inputs=ContextInputs(modified_files=(FileModification("a"),)))
    assert prepared.reminders == () and prepared.messages == history
