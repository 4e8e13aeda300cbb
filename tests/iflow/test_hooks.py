"""Hooks run real shell commands in a temporary folder."""

import json
from pathlib import Path

import pytest

from iflow.hooks import HookMatcher, arun_hooks, matching_commands, run_hooks


def hooks(event: str, matcher: str, *commands: str, timeout: float = 10) -> dict:
    group = HookMatcher(matcher=matcher, hooks=[{"command": c, "timeout": timeout} for c in commands])
    return {event: [group]}


def test_matcher_by_name_regex_and_wildcard():
    assert HookMatcher(matcher="write_file", hooks=[]).matches("write_file")
    assert not HookMatcher(matcher="write", hooks=[]).matches("write_file")  # whole name only
    assert HookMatcher(matcher="write_file|replace", hooks=[]).matches("replace")
    assert HookMatcher(matcher="*", hooks=[]).matches("anything")
    assert HookMatcher(matcher="", hooks=[]).matches("anything")
    with pytest.raises(ValueError, match="neither a tool name nor a valid regular expression"):
        HookMatcher(matcher="(", hooks=[])


def test_non_tool_events_ignore_the_matcher():
    config = hooks("SessionStart", "write_file", "true")
    assert len(matching_commands(config, "SessionStart", None)) == 1
    assert matching_commands(config, "SessionEnd", None) == []


def test_event_json_arrives_on_stdin(tmp_path: Path):
    config = hooks("PostToolUse", "read_file", "cat > event.json")
    outcome = run_hooks(
        config,
        "PostToolUse",
        {"tool_name": "read_file", "tool_input": {"path": "a"}},
        tmp_path,
        tool_name="read_file",
    )
    assert not outcome.blocked and outcome.results[0].ok
    event = json.loads((tmp_path / "event.json").read_text())
    assert event == {
        "hook_event_name": "PostToolUse",
        "cwd": str(tmp_path),
        "tool_name": "read_file",
        "tool_input": {"path": "a"},
    }


def test_pre_tool_use_nonzero_exit_blocks_and_stops_later_hooks(tmp_path: Path):
    config = hooks("PreToolUse", "write_file", "echo 'no writes to prod/'; exit 3", "touch second-ran")
    outcome = run_hooks(config, "PreToolUse", {"tool_name": "write_file"}, tmp_path, tool_name="write_file")
    assert outcome.blocked
    assert outcome.message == (
        "The call to write_file was blocked by a PreToolUse hook `echo 'no writes to prod/'; exit 3` "
        "exited 3:\nno writes to prod/"
    )
    assert not (tmp_path / "second-ran").exists()
    other = run_hooks(config, "PreToolUse", {"tool_name": "read_file"}, tmp_path, tool_name="read_file")
    assert other == run_hooks({}, "PreToolUse", {}, tmp_path) and not other.blocked


def test_other_events_report_failures_without_blocking(tmp_path: Path):
    config = hooks("PostToolUse", "*", "echo bad >&2; exit 1", "touch ran")
    outcome = run_hooks(config, "PostToolUse", {}, tmp_path, tool_name="write_file")
    assert not outcome.blocked
    assert outcome.message == "hook `echo bad >&2; exit 1` exited 1:\nbad"
    assert (tmp_path / "ran").exists()


async def test_timeout_kills_the_process_group_and_blocks(tmp_path: Path):
    config = hooks("PreToolUse", "", "sleep 30 & sleep 30; touch late", timeout=0.5)
    outcome = await arun_hooks(config, "PreToolUse", {}, tmp_path, tool_name="replace")
    assert outcome.blocked
    assert outcome.results[0].exit_code is None
    assert "timed out" in outcome.message and "killed after 0.5 s" in outcome.message
    assert not (tmp_path / "late").exists()
