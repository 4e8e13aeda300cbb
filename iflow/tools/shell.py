"""run_shell_command: one persistent shell per session (cwd and exported variables carry over)."""

from __future__ import annotations

from typing import Any, ClassVar

from iflow.tools.base import Tool, ToolContext, ToolError, ToolKind, ToolResult
from iflow.types import TOOL_ERROR_PREFIX

MAX_TIMEOUT_S = 600.0


class RunShellCommand(Tool):
    name = "run_shell_command"
    kind = ToolKind.SHELL
    brief = "Run a bash command in the working directory; cd and export persist; no stdin."
    compact_hidden = frozenset({"description", "timeout"})
    description = (
        "Run a bash command in the working directory. The shell persists between calls: `cd` and `export` "
        "carry over. stdin is closed, so avoid interactive commands. A command past its timeout is killed "
        "with everything it started. Long output is cut in the middle."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The bash command line"},
            "description": {
                "type": "string",
                "description": "One line on what the command does, for the user",
            },
            "timeout": {
                "type": "number",
                "description": "Seconds before the command is killed (default 120)",
            },
        },
        "required": ["command"],
    }

    def describe(self, arguments: dict[str, Any]) -> str:
        return f"$ {arguments.get('command', '')}"

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        command = arguments["command"]
        if not command.strip():
            raise ToolError("command is empty")
        timeout = float(arguments.get("timeout", context.shell_timeout_s))
        if not 0 < timeout <= MAX_TIMEOUT_S:
            raise ToolError(f"timeout must be between 0 and {MAX_TIMEOUT_S:.0f} seconds")
        result = context.executor.run(command, timeout)
        output = result.output.rstrip("\n") or "(no output)"
        if result.timed_out:
            return ToolResult(
                f"{TOOL_ERROR_PREFIX}the command did not finish within {timeout:g} s and was killed with its "
                f"child processes. Run long jobs in the background (`cmd > log 2>&1 &`) or raise timeout.\n"
                f"Output before it was killed:\n{output}",
                ok=False,
                summary=f"timed out after {timeout:g} s",
            )
        note = (
            "\n(output was cut in the middle; redirect to a file and read parts of it)"
            if result.truncated
            else ""
        )
        return ToolResult(
            f"Output:\n{output}{note}\nExit code: {result.exit_code}",
            ok=result.exit_code == 0,
            summary=f"exit code {result.exit_code}",
        )
