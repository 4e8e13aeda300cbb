"""What a tool is: a name, a JSON schema, a kind that decides approval, and ``run``.

Tool results follow ``iflow.types`` conventions so ``iflow.context`` can read outcomes from messages
alone: a failure's text starts with ``TOOL_ERROR_PREFIX``; write tools name their file in ``file_path``.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar

from iflow.executors.base import Executor
from iflow.types import TOOL_ERROR_PREFIX, PromptProfile

if TYPE_CHECKING:
    from iflow.todos import TodoStore


class ToolKind(StrEnum):
    READ = "read"  # never changes anything
    EDIT = "edit"  # changes files in the working directory
    SHELL = "shell"  # runs arbitrary commands
    META = "meta"  # the agent's own bookkeeping: todos, memory, sub-agents


class ToolError(Exception):
    """The call cannot be done as asked; the message tells the model what to do instead."""


@dataclass
class ToolResult:
    output: str
    ok: bool = True
    summary: str = ""  # one line for people
    modified_paths: list[str] = field(default_factory=list)

    @classmethod
    def failure(cls, message: str) -> ToolResult:
        return cls(output=f"{TOOL_ERROR_PREFIX}{message}", ok=False, summary=message.splitlines()[0][:120])


@dataclass
class ToolContext:
    """What tools may use besides their arguments."""

    executor: Executor
    todos: TodoStore
    save_memory: Callable[[str], str]
    run_subagent: Callable[[str, str, str | None], str] | None = None
    shell_timeout_s: float = 120.0


class Tool(ABC):
    """A tool as shown to the model in one prompt profile (``iflow.types.PromptProfile``).

    The compact and shell profiles show ``brief`` (one line) instead of ``description``, drops the parameters'
    descriptions and hides the optional parameters in ``compact_hidden``; the tool still accepts them.
    """

    name: str
    description: str
    brief: ClassVar[str | None] = None
    parameters: ClassVar[dict[str, Any]]
    compact_hidden: ClassVar[frozenset[str]] = frozenset()
    kind: ToolKind

    def __init__(self, profile: PromptProfile = "full") -> None:
        self.profile = profile

    def schema(self) -> dict[str, Any]:
        """The OpenAI ``tools`` entry."""
        if self.profile != "full":
            description = self.brief or self.description
            properties = {
                key: _without_descriptions(value)
                for key, value in self.parameters.get("properties", {}).items()
                if key not in self.compact_hidden
            }
            parameters = {**self.parameters, "properties": properties}
        else:
            description, parameters = self.description, self.parameters
        return {
            "type": "function",
            "function": {"name": self.name, "description": description, "parameters": parameters},
        }

    def check_arguments(self, arguments: dict[str, Any]) -> None:
        """Check against the schema; numbers and booleans written as strings ("30", "true") are converted."""
        properties: dict[str, Any] = self.parameters.get("properties", {})
        missing = [key for key in self.parameters.get("required", []) if key not in arguments]
        if missing:
            raise ToolError(f"{self.name} needs the argument(s) {', '.join(missing)}")
        unknown = [key for key in arguments if key not in properties]
        if unknown:
            raise ToolError(
                f"{self.name} has no argument(s) {', '.join(unknown)}; it takes {', '.join(properties)}"
            )
        for key, value in list(arguments.items()):
            expected = properties[key].get("type")
            if expected and not _has_json_type(value, expected):
                converted = _from_string(value, expected)
                if converted is None:
                    raise ToolError(f"{self.name}: argument {key} must be of JSON type {expected}")
                arguments[key] = converted

    def describe(self, arguments: dict[str, Any]) -> str:
        """A short line shown to people when the call is proposed or asked for approval."""
        first = next(iter(arguments.values()), "")
        return f"{self.name}({str(first)[:80]})"

    @abstractmethod
    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult: ...


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


def _without_descriptions(schema: dict[str, Any]) -> dict[str, Any]:
    """A JSON schema without its "description" annotations (a property named "description" stays)."""
    bare: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "description":
            continue
        if key == "properties":
            bare[key] = {name: _without_descriptions(sub) for name, sub in value.items()}
        elif key == "items" and isinstance(value, dict):
            bare[key] = _without_descriptions(value)
        else:
            bare[key] = value
    return bare


def _from_string(value: Any, expected: str) -> Any:
    """Small models often quote scalars; take "30" for 30 and "true" for true, nothing looser."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    if expected == "integer" and re.fullmatch(r"-?\d+", text):
        return int(text)
    if expected == "number" and re.fullmatch(r"-?\d+(\.\d+)?", text):
        return float(text) if "." in text else int(text)
    if expected == "boolean" and text in ("true", "false"):
        return text == "true"
    return None


def _has_json_type(value: Any, expected: str) -> bool:
    if expected in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, _JSON_TYPES.get(expected, (object,)))
