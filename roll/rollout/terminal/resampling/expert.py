"""Expert trajectories for initialized resampling: the steps an expert took on a task, as tool-call chunks.

From a task's oracle solution, each top-level shell statement (a heredoc, a compound `if`/`for`/`while`/`case`
block or a backslash-continued line counts as one) becomes one `run_shell_command` call; a closing message
ends the trajectory. A recorded successful episode can serve as well (`expert_from_messages`), and so can the
trajectories an expert collected in the agent's own format (`recorded_experts`): those are what the policy was
warm-started on, so imitating them and starting after their prefixes continues in the format it already
writes, where the oracle script would add steps no agent writes (a `cd` into the working directory).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iflow.types import tool_result_failed
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


def has_failed_call(messages: list[dict[str, Any]]) -> bool:
    """Whether any tool call of a recorded episode failed: its result says so (iFlow's conventions), it has
    no result, or its assistant turn carries an `error` mark."""
    results = {m.get("tool_call_id"): m.get("content") for m in messages if m.get("role") == "tool"}
    for message in messages:
        if message.get("role") != "assistant":
            continue
        if message.get("error"):
            return True
        for call in message.get("tool_calls") or []:
            result = results.get(call.get("id"))
            if tool_result_failed(result if isinstance(result, str) else None):
                return True
    return False


def expert_from_messages(messages: list[dict[str, Any]]) -> list[ExpertStep]:
    """The steps of a recorded episode: one per assistant shell call (the first call of a message keeps the
    message's text), then the final answer."""
    steps: list[ExpertStep] = []
    for message in messages:
        if message.get("role") != "assistant":
            continue
        calls = [c for c in message.get("tool_calls") or [] if c["function"]["name"] == SHELL_TOOL]
        for index, call in enumerate(calls):
            command = json.loads(call["function"]["arguments"])["command"]
            text = (message.get("content") or "") if index == 0 else ""
            steps.append(ExpertStep(command=command, content=text))
        if not message.get("tool_calls"):
            steps.append(ExpertStep(command=None, content=message.get("content") or FINAL_MESSAGE))
    return steps


class RecordedExpertsError(ValueError):
    """A file of expert trajectories that cannot be read; the message says which line and why."""


def recorded_experts(path: Path) -> dict[str, list[ExpertStep]]:
    """Per task, the steps of its shortest successful trajectory in `path` (JSONL of rome trajectory records:
    task_id, messages, verifier). Trajectories that failed their tests, or hold a call that failed (judged by
    what happened: its tool result's exit code or error, or the turn's `error` mark), are passed over: an
    expert's every step must be worth imitating."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise RecordedExpertsError(
            f"env.experts: {path} cannot be read ({error.strerror or error}); point env.experts at a JSONL "
            "of trajectories or remove it to start from the oracle solutions"
        ) from error
    experts: dict[str, list[ExpertStep]] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            task_id, messages = record["task_id"], record["messages"]
            passed = bool((record.get("verifier") or {}).get("passed"))
            steps = expert_from_messages(messages)
            mistaken = has_failed_call(messages)
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise RecordedExpertsError(
                f"env.experts: {path} line {number} is not a trajectory record with task_id and messages "
                f"({type(error).__name__}: {error}); fix or remove that line"
            ) from error
        if not passed or mistaken or not steps:
            continue
        if task_id not in experts or len(steps) < len(experts[task_id]):
            experts[task_id] = steps
    return experts
