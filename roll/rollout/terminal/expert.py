"""Expert trajectories for initialized resampling: the steps an expert took on a task, as tool-call chunks.

From a task's oracle solution, each top-level shell statement (a heredoc, a compound `if`/`for`/`while`/`case`
block or a backslash-continued line counts as one) becomes one `run_shell_command` call; a closing message
ends the trajectory. A recorded successful episode can serve as well (`expert_from_messages`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from rome.terminal_tasks.task import Task

SHELL_TOOL = "run_shell_command"
HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
OPENERS = {"if": "fi", "for": "done", "while": "done", "until": "done", "case": "esac"}
CLOSERS = {"fi", "done", "esac"}
# Shell options that would end a persistent session on the first failing command.
SESSION_UNSAFE = re.compile(r"^set\s+-[euxo]+(\s+pipefail)?\s*$")
FINAL_MESSAGE = "The task is done."


@dataclass(frozen=True)
class ExpertStep:
    """One chunk of an expert trajectory: a shell command to run, or (command None) the final answer."""

    command: str | None
    content: str = ""

    def assistant_message(self, call_id: str) -> dict[str, Any]:
        if self.command is None:
            return {"role": "assistant", "content": self.content}
        arguments = json.dumps({"command": self.command}, ensure_ascii=False)
        call = {"id": call_id, "type": "function", "function": {"name": SHELL_TOOL, "arguments": arguments}}
        return {"role": "assistant", "content": self.content, "tool_calls": [call]}


def split_statements(script: str) -> list[str]:
    """Top-level statements of a bash script, without the shebang, comments, blank lines and `set -e`."""
    statements: list[str] = []
    current: list[str] = []
    heredoc_end: str | None = None
    depth = 0
    for line in script.splitlines():
        stripped = line.strip()
        if heredoc_end is not None:
            current.append(line)
            if stripped == heredoc_end:
                heredoc_end = None
        else:
            if not current and (not stripped or stripped.startswith("#") or SESSION_UNSAFE.match(stripped)):
                continue
            current.append(line)
            marker = HEREDOC.search(line)
            if marker is not None:
                heredoc_end = marker.group(2)
            words = stripped.replace(";", " ; ").split()
            depth += sum(word in OPENERS for word in words) - sum(word in CLOSERS for word in words)
        if heredoc_end is None and depth <= 0 and not stripped.endswith("\\"):
            statements.append("\n".join(current))
            current, depth = [], 0
    if current:
        statements.append("\n".join(current))
    return statements


def oracle_expert(task: Task) -> list[ExpertStep]:
    """The task's solution script as expert steps (one per statement) and a final message."""
    if task.solution_command is None or not task.solution_files:
        raise ValueError(f"task {task.id} has no solution script, so it has no oracle expert trajectory")
    script = next(
        (f for f in task.solution_files if f.name in ("solve.sh", "solution.sh")), task.solution_files[0]
    )
    steps = [ExpertStep(command=statement) for statement in split_statements(script.read_text())]
    if not steps:
        raise ValueError(f"the solution script {script} of task {task.id} holds no command")
    return [*steps, ExpertStep(command=None, content=FINAL_MESSAGE)]


def expert_from_messages(messages: list[dict[str, Any]]) -> list[ExpertStep]:
    """The steps of a recorded episode: one per assistant shell call, then the final answer."""
    steps: list[ExpertStep] = []
    for message in messages:
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or []:
            if call["function"]["name"] == SHELL_TOOL:
                steps.append(ExpertStep(command=json.loads(call["function"]["arguments"])["command"]))
        if not message.get("tool_calls"):
            steps.append(ExpertStep(command=None, content=message.get("content") or FINAL_MESSAGE))
    return steps
