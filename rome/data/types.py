"""The trajectory record: one line of the JSONL that `rome data collect` writes and later stages read.

`messages` is the agent's own history (system prompt, instruction, assistant turns with iFlow tool calls,
tool results), `calls` one entry per model call as the model proxy recorded it (with token ids when the
model is served by ROLL), `verifier` the task's tests' verdict. Filters add their verdicts under `filters`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from iflow.types import tool_result_failed

FORMAT = "rome-trajectory/1"
SHELL_TOOL = "run_shell_command"


class ModelCall(BaseModel):
    """One model call of the episode, from the proxy's recording."""

    context_messages: int = Field(description="How many messages the request carried")
    response: dict[str, Any] = Field(description="The assistant message the model answered")
    finish_reason: str | None = None
    prompt_token_ids: list[int] | None = None
    output_token_ids: list[int] | None = None
    output_logprobs: list[float] | None = None
    weight_version: int | None = None
    usage: dict[str, Any] = Field(default_factory=dict)
    latency_s: float = 0.0


class VerifierResult(BaseModel):
    reward: float
    passed: bool
    failure_mode: str | None = None
    error: str | None = None
    output: str = ""


class TrajectoryRecord(BaseModel):
    format: Literal["rome-trajectory/1"] = FORMAT
    id: str
    task_id: str
    task_path: str
    family: str | None = None
    seed: int | None = None
    difficulty: str = "unknown"
    domain: str = "uncategorized"
    attempt: int
    agent: str
    model: str
    instruction: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = Field(default_factory=list)
    calls: list[ModelCall] = Field(default_factory=list)
    verifier: VerifierResult
    agent_error: str | None = None
    duration_s: float = 0.0
    filters: dict[str, str] = Field(default_factory=dict, description="stage -> 'kept' or the drop reason")


class ToolStep(BaseModel):
    """One tool call of a trajectory and what came of it."""

    assistant_index: int
    tool: str
    arguments: dict[str, Any] | None
    raw_arguments: str
    result: str | None
    failed: bool

    @property
    def command(self) -> str | None:
        if self.tool != SHELL_TOOL or not isinstance(self.arguments, dict):
            return None
        command = self.arguments.get("command")
        return command if isinstance(command, str) else None


def tool_steps(messages: list[dict[str, Any]]) -> list[ToolStep]:
    results = {m.get("tool_call_id"): m.get("content") for m in messages if m.get("role") == "tool"}
    steps: list[ToolStep] = []
    for index, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            raw = function.get("arguments") or ""
            try:
                arguments = json.loads(raw)
            except (TypeError, ValueError):
                arguments = None
            result = results.get(call.get("id"))
            content = result if isinstance(result, str) else None
            steps.append(
                ToolStep(
                    assistant_index=index,
                    tool=str(function.get("name")),
                    arguments=arguments if isinstance(arguments, dict) else None,
                    raw_arguments=raw if isinstance(raw, str) else json.dumps(raw),
                    result=content,
                    failed=tool_result_failed(content),
                )
            )
    return steps


class TrajectoryFileError(ValueError):
    """A JSONL line that is not a trajectory record; the message names the file and line."""


def read_trajectories(path: Path) -> Iterator[TrajectoryRecord]:
    if not path.is_file():
        raise TrajectoryFileError(
            f"{path} does not exist; make it with `rome data collect TASKS --out {path}`"
        )
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield TrajectoryRecord.model_validate_json(line)
            except ValidationError as error:
                first = error.errors()[0]
                where = ".".join(str(p) for p in first["loc"]) or "the line"
                raise TrajectoryFileError(
                    f"{path}:{number}: not a trajectory record "
                    f"({where}: {first['msg']}); this file must hold "
                    "`rome data collect` output, one JSON object per line"
                ) from error


def write_trajectories(path: Path, records: list[TrajectoryRecord]) -> None:
    from rome.data.taskset import write_atomic

    write_atomic(path, "".join(r.model_dump_json() + "\n" for r in records))
