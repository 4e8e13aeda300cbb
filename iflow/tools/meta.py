"""The agent's own bookkeeping tools: the todo list, long-term memory, and sub-agents."""

from __future__ import annotations

from typing import Any, ClassVar

from iflow.tools.base import Tool, ToolContext, ToolError, ToolKind, ToolResult

TODO_STATUSES = ("pending", "in_progress", "completed")


class TodoWrite(Tool):
    name = "todo_write"
    kind = ToolKind.META
    description = (
        "Replace the task's todo list with the given items (send the whole list every time). Use it for "
        "multi-step work: mark one item in_progress while working on it and completed when done."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "todos": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"},
                        "content": {"type": "string"},
                        "status": {"type": "string", "enum": list(TODO_STATUSES)},
                    },
                    "required": ["id", "content", "status"],
                },
            }
        },
        "required": ["todos"],
    }

    def describe(self, arguments: dict[str, Any]) -> str:
        return f"todo_write ({len(arguments.get('todos') or [])} items)"

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        todos = arguments["todos"]
        for number, item in enumerate(todos, start=1):
            if not isinstance(item, dict) or not {"id", "content", "status"} <= item.keys():
                raise ToolError(f"todo {number} needs id, content and status")
            if item["status"] not in TODO_STATUSES:
                raise ToolError(
                    f"todo {number} has status {item['status']!r}; use one of {', '.join(TODO_STATUSES)}"
                )
        context.todos.save(
            [{"id": str(t["id"]), "content": str(t["content"]), "status": t["status"]} for t in todos]
        )
        return ToolResult("Todo list updated:\n" + context.todos.render(), summary=f"{len(todos)} todo(s)")


class TodoRead(Tool):
    name = "todo_read"
    kind = ToolKind.READ
    description = "Show the current todo list of this project."
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}, "required": []}

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        return ToolResult(context.todos.render(), summary=f"{len(context.todos.load())} todo(s)")


class SaveMemory(Tool):
    name = "save_memory"
    kind = ToolKind.META
    description = (
        "Remember a fact across sessions (appended to the user's global IFLOW.md). Use it for durable "
        "preferences or facts the user asks you to remember, not for task notes."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"fact": {"type": "string", "description": "One self-contained statement"}},
        "required": ["fact"],
    }

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        fact = arguments["fact"].strip()
        if not fact:
            raise ToolError("fact is empty")
        where = context.save_memory(fact)
        return ToolResult(f"Saved to memory ({where}): {fact}", summary="memory saved")


class Task(Tool):
    name = "task"
    kind = ToolKind.META
    description = (
        "Hand a self-contained sub-task to a sub-agent with its own fresh context and a bounded number of "
        "turns. It sees only the prompt you give it (state everything it needs) and returns a summary. "
        "Good for searches and investigations whose details would crowd your context."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "description": {"type": "string", "description": "A few words on the sub-task, for the user"},
            "prompt": {"type": "string", "description": "The full instructions for the sub-agent"},
            "subagent_type": {
                "type": "string",
                "description": "Name of an agent defined in .iflow/agents/ (default: general-purpose)",
            },
        },
        "required": ["description", "prompt"],
    }

    def describe(self, arguments: dict[str, Any]) -> str:
        return f"task: {arguments.get('description', '')}"

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        if context.run_subagent is None:
            raise ToolError("sub-agents cannot start sub-agents; do this part yourself")
        summary = context.run_subagent(
            arguments["description"], arguments["prompt"], arguments.get("subagent_type")
        )
        return ToolResult(summary, summary=f"sub-agent finished: {arguments['description']}")
