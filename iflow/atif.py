"""ATIF (Harbor's Agent Trajectory Interchange Format) for ALE: the one writer and reader every producer uses,
and the mapping between OpenAI chat messages (what iflow, the proxy and the data stage keep) and ATIF steps.

Every file is validated with the `atif` package's pydantic models on the way out and on the way in, so what
ALE writes opens in any ATIF tool and what others wrote is refused with the field that is wrong.

Mapping: a system or user message is one step of that source; an assistant message is one `agent` step
whose tool calls are ATIF tool calls, and the tool messages that answer them are that step's observation
results (matched by call id). Tool-call arguments are kept as the exact JSON text the model produced in the
call's `extra.raw_arguments` whenever they are not a JSON object (or not the canonical spelling of one), so
`messages_from_trajectory` gives back the very messages a trajectory was made from.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import atif
from pydantic import ValidationError

from iflow.types import Message, ToolCall

SCHEMA_VERSION = "ATIF-v1.8"
TRAJECTORY_FILE = "trajectory.json"


class AtifError(ValueError):
    """A trajectory that is not valid ATIF; the message names the file and the field."""


def ale_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ale")
    except PackageNotFoundError:
        return "0+unknown"


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


def _tool_call(call: ToolCall, position: str) -> atif.ToolCall:
    """One OpenAI tool call as ATIF's. Arguments that are not the canonical JSON text of an object (bad
    JSON, a list, other spacing, or a server that sent an object instead of text) keep their exact form in
    `extra.raw_arguments`; a call without an id gets one from its position."""
    function = call.get("function") or {}
    call_id = str(call.get("id") or f"call-{position}")
    name = str(function.get("name") or "")
    raw: Any = function.get("arguments")
    if isinstance(raw, dict):
        return atif.ToolCall(tool_call_id=call_id, function_name=name, arguments=raw)
    raw = raw if isinstance(raw, str) else json.dumps(raw)
    try:
        parsed = json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict) and (not raw or json.dumps(parsed, ensure_ascii=False) == raw):
        return atif.ToolCall(tool_call_id=call_id, function_name=name, arguments=parsed)
    return atif.ToolCall(
        tool_call_id=call_id,
        function_name=name,
        arguments=parsed if isinstance(parsed, dict) else {},
        extra={"raw_arguments": raw},
    )


def steps_from_messages(
    messages: Sequence[Message], step_extras: dict[int, dict[str, Any]] | None = None, first_id: int = 1
) -> list[atif.Step]:
    """ATIF steps for OpenAI chat messages. `step_extras` maps a message's index (an assistant message's,
    for agent steps) to that step's `extra`."""
    extras = step_extras or {}
    steps: list[atif.Step] = []
    calls_of_last_agent: set[str] = set()
    for index, message in enumerate(messages):
        role = message["role"]
        if role == "tool":
            call_id = message.get("tool_call_id")
            if steps and steps[-1].source == "agent" and call_id in calls_of_last_agent:
                step = steps[-1]
                result = atif.ObservationResult(source_call_id=call_id, content=_text(message.get("content")))
                step.observation = atif.Observation(
                    results=[*(step.observation.results if step.observation else []), result]
                )
                continue
            # A tool result whose call is not in the step before it (a cut history): kept as a system event.
            steps.append(
                atif.Step(
                    step_id=first_id + len(steps),
                    source="system",
                    message=_text(message.get("content")),
                    extra={"orphan_tool_call_id": call_id, **extras.get(index, {})},
                )
            )
            continue
        extra = extras.get(index) or None
        if role == "assistant":
            calls = [
                _tool_call(call, f"{len(steps)}-{n}")
                for n, call in enumerate(message.get("tool_calls") or [])
            ]
            calls_of_last_agent = {call.tool_call_id for call in calls}
            steps.append(
                atif.Step(
                    step_id=first_id + len(steps),
                    source="agent",
                    message=_text(message.get("content")),
                    tool_calls=calls or None,
                    extra=extra,
                )
            )
        else:
            calls_of_last_agent = set()
            source = "system" if role == "system" else "user"
            steps.append(
                atif.Step(
                    step_id=first_id + len(steps),
                    source=source,
                    message=_text(message.get("content")),
                    extra=extra,
                )
            )
    return steps


def messages_from_trajectory(trajectory: atif.Trajectory, skip_copied: bool = False) -> list[Message]:
    """OpenAI chat messages for an ATIF trajectory (the inverse of `steps_from_messages`). Observation
    results without a tool call (a command's output in a trajectory written by another agent) become user
    messages, so the model still sees what came back. `skip_copied` drops steps marked as copied context."""
    messages: list[Message] = []
    for step in trajectory.steps:
        if skip_copied and step.is_copied_context:
            continue
        text = (
            step.message
            if isinstance(step.message, str)
            else _text([part.model_dump() for part in step.message])
        )
        if step.source == "agent":
            message: Message = {"role": "assistant", "content": text}
            if step.tool_calls:
                message["tool_calls"] = [
                    {
                        "id": call.tool_call_id,
                        "type": "function",
                        "function": {
                            "name": call.function_name,
                            "arguments": (call.extra or {}).get("raw_arguments")
                            or json.dumps(call.arguments, ensure_ascii=False),
                        },
                    }
                    for call in step.tool_calls
                ]
            messages.append(message)
        elif step.source == "system" and step.extra and "orphan_tool_call_id" in step.extra:
            messages.append(
                {"role": "tool", "tool_call_id": step.extra["orphan_tool_call_id"], "content": text}
            )
            continue
        else:
            messages.append({"role": "system" if step.source == "system" else "user", "content": text})
        for result in step.observation.results if step.observation else []:
            content = (
                result.content
                if isinstance(result.content, str)
                else _text([part.model_dump() for part in result.content or []])
            )
            if result.source_call_id is not None:
                messages.append({"role": "tool", "tool_call_id": result.source_call_id, "content": content})
            else:
                messages.append({"role": "user", "content": content})
    return messages


def build_trajectory(
    steps: list[atif.Step],
    agent_name: str,
    model_name: str | None = None,
    session_id: str | None = None,
    extra: dict[str, Any] | None = None,
    final_metrics: atif.FinalMetrics | None = None,
    notes: str | None = None,
    agent_extra: dict[str, Any] | None = None,
) -> atif.Trajectory:
    """A validated ATIF trajectory; `agent_name` names the system that acted (iflow, oracle, ...)."""
    if not steps:
        # ATIF needs no step, but a trajectory of nothing says nothing: record that the agent did nothing.
        steps = [atif.Step(step_id=1, source="system", message="(the agent took no step)")]
    try:
        return atif.Trajectory(
            schema_version=SCHEMA_VERSION,
            session_id=session_id,
            agent=atif.Agent(
                name=agent_name, version=ale_version(), model_name=model_name, extra=agent_extra
            ),
            steps=steps,
            notes=notes,
            final_metrics=final_metrics,
            extra=extra,
        )
    except ValidationError as error:
        raise AtifError(f"the trajectory of {session_id or agent_name} is not valid ATIF: {error}") from error


def trajectory_from_messages(
    messages: Sequence[Message],
    agent_name: str = "iflow",
    model_name: str | None = None,
    session_id: str | None = None,
    extra: dict[str, Any] | None = None,
) -> atif.Trajectory:
    return build_trajectory(steps_from_messages(messages), agent_name, model_name, session_id, extra)


def write_trajectory(path: Path, trajectory: atif.Trajectory) -> Path:
    """Write `trajectory` as JSON at `path` (atomically), after validating the very JSON that is written."""
    document = trajectory.to_json_dict()
    try:
        atif.Trajectory.model_validate(document)
    except ValidationError as error:
        raise AtifError(f"refusing to write {path}: not valid ATIF: {error}") from error
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def parse_trajectory(document: Any, origin: str) -> atif.Trajectory:
    try:
        return atif.Trajectory.model_validate(document)
    except ValidationError as error:
        raise AtifError(
            f"{origin} is not an ATIF trajectory ({error.error_count()} problem(s)): {error}; "
            "see Harbor's ATIF specification (schema_version, agent, steps with step_id 1, 2, ...)"
        ) from error


def read_trajectory(path: Path) -> atif.Trajectory:
    """An ATIF trajectory from a JSON file; a file that is not one raises AtifError naming what is wrong."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise AtifError(f"cannot read {path} as JSON: {error}") from error
    return parse_trajectory(document, str(path))
