"""The agent's tools, each with a JSON schema, all written against the executor protocol."""

from iflow.tools.base import Tool, ToolContext, ToolError, ToolKind, ToolResult
from iflow.tools.files import Glob, ListDirectory, MultiEdit, ReadFile, Replace, SearchFileContent, WriteFile
from iflow.tools.meta import SaveMemory, Task, TodoRead, TodoWrite
from iflow.tools.shell import RunShellCommand


def all_tools() -> list[Tool]:
    """Every tool, in the order the model sees them."""
    return [
        RunShellCommand(),
        ReadFile(),
        WriteFile(),
        Replace(),
        MultiEdit(),
        ListDirectory(),
        Glob(),
        SearchFileContent(),
        TodoWrite(),
        TodoRead(),
        SaveMemory(),
        Task(),
    ]


__all__ = ["Tool", "ToolContext", "ToolError", "ToolKind", "ToolResult", "all_tools"]
