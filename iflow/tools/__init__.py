"""The agent's tools, each with a JSON schema, all written against the executor protocol."""

from iflow.tools.base import Tool, ToolContext, ToolError, ToolKind, ToolResult
from iflow.tools.files import Glob, ListDirectory, MultiEdit, ReadFile, Replace, SearchFileContent, WriteFile
from iflow.tools.meta import SaveMemory, Task, TodoRead, TodoWrite
from iflow.tools.shell import RunShellCommand
from iflow.types import PromptProfile

ALL_TOOLS: tuple[type[Tool], ...] = (
    RunShellCommand,
    ReadFile,
    WriteFile,
    Replace,
    MultiEdit,
    ListDirectory,
    Glob,
    SearchFileContent,
    TodoWrite,
    TodoRead,
    SaveMemory,
    Task,
)
# The compact profile keeps what a terminal task cannot do without: the shell (which also lists, finds and
# greps) and the file tools whose exact-text semantics a shell one-liner gets wrong. multi_edit, listing,
# glob, search, the todo list, memory and sub-agents would cost a small model most of its prompt.
COMPACT_TOOLS: tuple[type[Tool], ...] = (RunShellCommand, ReadFile, WriteFile, Replace)
PROFILE_TOOLS: dict[PromptProfile, tuple[type[Tool], ...]] = {
    "full": ALL_TOOLS,
    "compact": COMPACT_TOOLS,
    "shell": (RunShellCommand,),
}


def tools_for(profile: PromptProfile) -> list[Tool]:
    """The tools of a prompt profile, in the order the model sees them, showing that profile's schemas."""
    return [tool(profile) for tool in PROFILE_TOOLS[profile]]


def all_tools() -> list[Tool]:
    """Every tool, in the order the model sees them (the full profile)."""
    return tools_for("full")


__all__ = ["Tool", "ToolContext", "ToolError", "ToolKind", "ToolResult", "all_tools", "tools_for"]
