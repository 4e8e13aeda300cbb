"""File tools: read, write, exact-match edits, listing, glob and content search."""

from __future__ import annotations

from typing import Any, ClassVar

from iflow.executors.base import match_glob
from iflow.tools.base import Tool, ToolContext, ToolError, ToolKind, ToolResult

DEFAULT_READ_LINES = 2000
MAX_LINE_CHARS = 2000
MAX_GLOB_RESULTS = 500
MAX_SEARCH_MATCHES = 200

_FILE_PATH = {
    "type": "string",
    "description": "Path relative to the working directory (or absolute inside it)",
}


class ReadFile(Tool):
    name = "read_file"
    kind = ToolKind.READ
    brief = "Read a text file (its first 2000 lines)."
    compact_hidden = frozenset({"offset", "limit"})
    description = (
        "Read a text file. Without offset/limit it returns up to 2000 lines from the start; for long files "
        "pass offset (first line, 1-based) and limit (number of lines) to read a range."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "file_path": _FILE_PATH,
            "offset": {"type": "integer", "description": "First line to read, 1-based"},
            "limit": {"type": "integer", "description": "Number of lines to read"},
        },
        "required": ["file_path"],
    }

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        path = arguments["file_path"]
        offset = int(arguments.get("offset", 1))
        limit = int(arguments.get("limit", DEFAULT_READ_LINES))
        if offset < 1 or limit < 1:
            raise ToolError("offset and limit must be at least 1")
        lines = context.executor.read_text(path).splitlines(keepends=True)
        if lines and offset > len(lines):
            raise ToolError(f"{path} has {len(lines)} lines; offset {offset} is past the end")
        chosen = lines[offset - 1 : offset - 1 + limit]
        text = "".join(
            line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + "…\n" for line in chosen
        )
        last = offset - 1 + len(chosen)
        if offset > 1 or last < len(lines):
            header = f"[{path}: lines {offset}-{last} of {len(lines)}; use offset/limit to read more]\n"
            text = header + text
        return ToolResult(text, summary=f"read {path} ({len(chosen)} lines)")


class WriteFile(Tool):
    name = "write_file"
    kind = ToolKind.EDIT
    brief = "Write a whole file, replacing its content."
    description = "Write a whole file, creating it and its folders if needed, replacing any previous content."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "file_path": _FILE_PATH,
            "content": {"type": "string", "description": "The full content"},
        },
        "required": ["file_path", "content"],
    }

    def describe(self, arguments: dict[str, Any]) -> str:
        return f"write_file {arguments.get('file_path')} ({len(str(arguments.get('content', '')))} chars)"

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        path, content = arguments["file_path"], arguments["content"]
        existed = context.executor.exists(path)
        context.executor.write_text(path, content)
        verb = "Overwrote" if existed else "Created"
        lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
        return ToolResult(
            f"{verb} {path} ({lines} lines).", summary=f"{verb.lower()} {path}", modified_paths=[path]
        )


def apply_edit(text: str, path: str, old: str, new: str, expected: int) -> str:
    """``text`` with ``old`` replaced by ``new``; ``old`` must occur exactly ``expected`` times."""
    if old == new:
        raise ToolError("old_string and new_string are identical; nothing would change")
    if not old:
        raise ToolError(f"old_string is empty; to create or overwrite {path} use write_file")
    found = text.count(old)
    if found == 0:
        raise ToolError(
            f"old_string was not found in {path}; read the file again and copy the exact text, "
            "including whitespace and indentation"
        )
    if found != expected:
        raise ToolError(
            f"old_string matches {found} times in {path} but {expected} replacement(s) were expected; "
            f"include more surrounding lines to make it unique, or set expected_replacements to {found}"
        )
    return text.replace(old, new)


class Replace(Tool):
    name = "replace"
    kind = ToolKind.EDIT
    brief = "Replace old_string, copied exactly from the file, with new_string."
    compact_hidden = frozenset({"expected_replacements"})
    description = (
        "Replace exact text in a file. old_string must match the file exactly (whitespace included) and be "
        "unique unless expected_replacements says how many occurrences to replace. Read the file first."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "file_path": _FILE_PATH,
            "old_string": {"type": "string", "description": "Exact text to replace"},
            "new_string": {"type": "string", "description": "Replacement text"},
            "expected_replacements": {"type": "integer", "description": "Occurrences to replace (default 1)"},
        },
        "required": ["file_path", "old_string", "new_string"],
    }

    def describe(self, arguments: dict[str, Any]) -> str:
        return f"replace in {arguments.get('file_path')}"

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        path = arguments["file_path"]
        expected = int(arguments.get("expected_replacements", 1))
        text = context.executor.read_text(path)
        updated = apply_edit(text, path, arguments["old_string"], arguments["new_string"], expected)
        context.executor.write_text(path, updated)
        return ToolResult(
            f"Replaced {expected} occurrence(s) in {path}.", summary=f"edited {path}", modified_paths=[path]
        )


class MultiEdit(Tool):
    name = "multi_edit"
    kind = ToolKind.EDIT
    description = (
        "Apply several exact-text replacements to one file, in order, all or nothing: if any edit does not "
        "match, the file is left unchanged. Each edit follows the rules of replace."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "file_path": _FILE_PATH,
            "edits": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "old_string": {"type": "string"},
                        "new_string": {"type": "string"},
                        "expected_replacements": {"type": "integer"},
                    },
                    "required": ["old_string", "new_string"],
                },
            },
        },
        "required": ["file_path", "edits"],
    }

    def describe(self, arguments: dict[str, Any]) -> str:
        return f"multi_edit {arguments.get('file_path')} ({len(arguments.get('edits') or [])} edits)"

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        path = arguments["file_path"]
        edits = arguments["edits"]
        if not edits:
            raise ToolError("edits is empty; give at least one {old_string, new_string}")
        text = context.executor.read_text(path)
        for number, edit in enumerate(edits, start=1):
            if not isinstance(edit, dict) or "old_string" not in edit or "new_string" not in edit:
                raise ToolError(f"edit {number} needs old_string and new_string; the file was not changed")
            try:
                text = apply_edit(
                    text,
                    path,
                    edit["old_string"],
                    edit["new_string"],
                    int(edit.get("expected_replacements", 1)),
                )
            except ToolError as error:
                raise ToolError(
                    f"edit {number} of {len(edits)}: {error}; the file was not changed"
                ) from error
        context.executor.write_text(path, text)
        return ToolResult(
            f"Applied {len(edits)} edit(s) to {path}.", summary=f"edited {path}", modified_paths=[path]
        )


class ListDirectory(Tool):
    name = "list_directory"
    kind = ToolKind.READ
    description = "List the files and folders directly inside a directory (folders end with '/')."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"path": {"type": "string", "description": "Directory, default the working directory"}},
        "required": [],
    }

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        path = arguments.get("path", ".")
        entries = context.executor.list_directory(path)
        lines = [f"{e.name}/" if e.is_dir else f"{e.name} ({e.size} bytes)" for e in entries]
        body = "\n".join(lines) if lines else "(empty directory)"
        return ToolResult(f"Directory {path}:\n{body}", summary=f"listed {path} ({len(lines)} entries)")


class Glob(Tool):
    name = "glob"
    kind = ToolKind.READ
    description = (
        "Find files by name pattern: '*' within one folder, '**/' across folders, '{a,b}' alternatives, "
        "e.g. '**/*.py' or 'src/**/test_*.{js,ts}'. Returns paths relative to the working directory."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Glob pattern"},
            "path": {
                "type": "string",
                "description": "Directory to search from, default the working directory",
            },
        },
        "required": ["pattern"],
    }

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        base = arguments.get("path", ".").rstrip("/") or "."
        found = match_glob(arguments["pattern"], context.executor.list_files(base))
        paths = [name if base == "." else f"{base}/{name}" for name in found]
        if not paths:
            return ToolResult(f"No files match {arguments['pattern']} under {base}.", summary="no matches")
        shown = paths[:MAX_GLOB_RESULTS]
        more = (
            f"\n... and {len(paths) - len(shown)} more; narrow the pattern" if len(paths) > len(shown) else ""
        )
        return ToolResult("\n".join(shown) + more, summary=f"{len(paths)} file(s)")


class SearchFileContent(Tool):
    name = "search_file_content"
    kind = ToolKind.READ
    description = (
        "Search file contents with a regular expression (ripgrep when installed). Returns 'path:line: text' "
        "for each match; include limits the files searched by glob, e.g. '*.py'."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Regular expression"},
            "path": {"type": "string", "description": "File or directory, default the working directory"},
            "include": {"type": "string", "description": "Glob of files to search, e.g. '*.py'"},
        },
        "required": ["pattern"],
    }

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        pattern = arguments["pattern"]
        path = arguments.get("path", ".")
        matches = context.executor.search(pattern, path, arguments.get("include"), MAX_SEARCH_MATCHES + 1)
        if not matches:
            return ToolResult(f"No matches for {pattern!r} in {path}.", summary="no matches")
        lines = [f"{m.path}:{m.line}: {m.text[:MAX_LINE_CHARS]}" for m in matches[:MAX_SEARCH_MATCHES]]
        if len(matches) > MAX_SEARCH_MATCHES:
            lines.append(f"... more than {MAX_SEARCH_MATCHES} matches; narrow the pattern or the path")
        return ToolResult("\n".join(lines), summary=f"{min(len(matches), MAX_SEARCH_MATCHES)} match(es)")
