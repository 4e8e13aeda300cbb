"""Hooks: user commands that run on agent events, configured under `hooks` in settings.json.

    "hooks": {"PreToolUse": [
        {"matcher": "write_file|replace", "hooks": [{"command": "./check.sh", "timeout": 10}]}
    ]}

Each command runs through `/bin/sh -c` in the working directory with the event as JSON on stdin
(`hook_event_name`, `cwd` and the caller's fields, e.g. `tool_name` and `tool_input`). `matcher` selects tool
events by tool name: empty or `*` matches every tool, otherwise an exact name or a regular expression that
must match the whole name. A PreToolUse command that exits non-zero or times out blocks the tool call; its
output is what the model is told. Other events never block; their failures are reported in the outcome.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

HookEvent = Literal["PreToolUse", "PostToolUse", "SessionStart", "SessionEnd", "UserPromptSubmit", "Stop"]
TOOL_EVENTS = frozenset({"PreToolUse", "PostToolUse"})
OUTPUT_LIMIT_CHARS = 10_000


class HookCommand(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["command"] = Field("command", description="hook kind: command (the only one)")
    command: str = Field(min_length=1, description="shell command, run with /bin/sh -c")
    timeout: float = Field(60.0, gt=0, description="seconds before the command is killed")


class HookMatcher(BaseModel):
    model_config = ConfigDict(extra="forbid")

    matcher: str = Field("", description="tool name or regex (whole name); empty or * matches all tools")
    hooks: list[HookCommand] = Field(description="commands run, in order, for a matching tool")

    @field_validator("matcher")
    @classmethod
    def _valid_regex(cls, value: str) -> str:
        if value == "*":
            return value
        try:
            re.compile(value)
        except re.error as error:
            raise ValueError(
                f"matcher {value!r} is neither a tool name nor a valid regular expression ({error}); "
                "write a tool name such as write_file or a regex such as write_file|replace"
            ) from error
        return value

    def matches(self, tool_name: str | None) -> bool:
        if tool_name is None or self.matcher in ("", "*") or self.matcher == tool_name:
            return True
        return re.fullmatch(self.matcher, tool_name) is not None


HooksConfig = dict[HookEvent, list[HookMatcher]]


@dataclass(frozen=True)
class HookResult:
    command: str
    exit_code: int | None  # None when the command was killed at its timeout
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def describe(self) -> str:
        status = "timed out" if self.exit_code is None else f"exited {self.exit_code}"
        output = "\n".join(part for part in (self.stdout.strip(), self.stderr.strip()) if part)
        return f"hook `{self.command}` {status}" + (f":\n{output}" if output else "")


@dataclass(frozen=True)
class HookOutcome:
    """What the hooks of one event did. `blocked` only ever for PreToolUse; `message` is for the model."""

    results: tuple[HookResult, ...] = ()
    blocked: bool = False
    message: str = ""


def matching_commands(
    hooks: Mapping[str, Sequence[HookMatcher]], event: HookEvent, tool_name: str | None
) -> list[HookCommand]:
    """The commands configured for `event` whose matcher selects `tool_name` (in configuration order)."""
    name = tool_name if event in TOOL_EVENTS else None
    return [command for group in hooks.get(event, ()) if group.matches(name) for command in group.hooks]


def run_command(command: HookCommand, stdin: str, cwd: Path) -> HookResult:
    """Run one hook command; on timeout its whole process group is killed."""
    process = subprocess.Popen(
        ["/bin/sh", "-c", command.command],
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(stdin, timeout=command.timeout)
        exit_code: int | None = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        exit_code = None
        stderr = f"{stderr}\nkilled after {command.timeout:g} s (raise `timeout` in the hook's settings)"
    return HookResult(command.command, exit_code, stdout[-OUTPUT_LIMIT_CHARS:], stderr[-OUTPUT_LIMIT_CHARS:])


def run_hooks(
    hooks: Mapping[str, Sequence[HookMatcher]],
    event: HookEvent,
    payload: Mapping[str, Any],
    cwd: Path,
    tool_name: str | None = None,
) -> HookOutcome:
    """Run the hooks for `event` one after another; a blocking PreToolUse failure stops the rest."""
    commands = matching_commands(hooks, event, tool_name)
    if not commands:
        return HookOutcome()
    stdin = json.dumps({"hook_event_name": event, "cwd": str(cwd), **payload})
    results: list[HookResult] = []
    for command in commands:
        result = run_command(command, stdin, cwd)
        results.append(result)
        if event == "PreToolUse" and not result.ok:
            message = f"The call to {tool_name} was blocked by a PreToolUse {result.describe()}"
            return HookOutcome(tuple(results), blocked=True, message=message)
    failures = [r.describe() for r in results if not r.ok]
    return HookOutcome(tuple(results), message="\n".join(failures))


async def arun_hooks(
    hooks: Mapping[str, Sequence[HookMatcher]],
    event: HookEvent,
    payload: Mapping[str, Any],
    cwd: Path,
    tool_name: str | None = None,
) -> HookOutcome:
    """`run_hooks` off the event loop."""
    return await asyncio.to_thread(run_hooks, hooks, event, payload, cwd, tool_name)
