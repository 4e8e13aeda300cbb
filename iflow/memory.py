"""Memory files: `IFLOW.md` and `AGENTS.md` instructions the agent reads at session start.

They are read in this order, each folder's `IFLOW.md` before its `AGENTS.md`: the global folder
(`$IFLOW_HOME`, `~/.iflow` by default), then every folder from the project root (the git root) down to the
working directory, so the most specific instructions come last. A token `@path` (outside code) whose file
exists is replaced by that file's text, resolved relative to the file that names it; imports nest up to
`MAX_IMPORT_DEPTH` deep and a file that would import itself, directly or not, is skipped with a note.
`save_memory` appends a fact to the global `IFLOW.md`; loading again is the refresh.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from iflow.settings import iflow_home, project_root

MEMORY_FILE_NAMES = ("IFLOW.md", "AGENTS.md")
MAX_IMPORT_DEPTH = 5
SAVED_SECTION = "## iFlow Added Memories"
IMPORT_PATTERN = re.compile(r"(?<![\w@`])@((?:~|\.{1,2})?/?[\w.\-/]*\w)")
CODE_PATTERN = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`", re.DOTALL)


@dataclass(frozen=True)
class MemoryFile:
    path: Path
    content: str  # imports expanded


@dataclass(frozen=True)
class Memory:
    files: tuple[MemoryFile, ...]

    def text(self) -> str:
        """All memory for the system prompt, each file under a line naming it ("" when there is none)."""
        return "\n\n".join(f"--- Context from: {f.path} ---\n{f.content.strip()}" for f in self.files)


def memory_paths(cwd: Path, env: Mapping[str, str] | None = None) -> list[Path]:
    """The memory files that apply in `cwd`, in load order (existing files only, each once)."""
    cwd = cwd.resolve()
    root = project_root(cwd)
    chain = [cwd]
    while chain[-1] != root:
        chain.append(chain[-1].parent)
    folders = [iflow_home(env), *reversed(chain)]
    seen: set[Path] = set()
    paths: list[Path] = []
    for folder in folders:
        for name in MEMORY_FILE_NAMES:
            path = folder / name
            if path.is_file() and path.resolve() not in seen:
                seen.add(path.resolve())
                paths.append(path)
    return paths


def load_memory(cwd: Path, env: Mapping[str, str] | None = None) -> Memory:
    """Read every memory file that applies in `cwd` (see the module docstring); call again to refresh."""
    return Memory(tuple(MemoryFile(p, expand_imports(p, (p.resolve(),))) for p in memory_paths(cwd, env)))


def expand_imports(path: Path, stack: tuple[Path, ...]) -> str:
    """The text of `path` with its `@path` imports replaced by their files' (expanded) text."""
    text = path.read_text(errors="replace")
    out: list[str] = []
    position = 0
    for code in [*CODE_PATTERN.finditer(text), None]:
        end = code.start() if code is not None else len(text)
        out.append(IMPORT_PATTERN.sub(lambda m: _imported(m, path.parent, stack), text[position:end]))
        if code is not None:
            out.append(code.group())
            position = code.end()
    return "".join(out)


def _imported(match: re.Match[str], base: Path, stack: tuple[Path, ...]) -> str:
    target = (base / Path(match.group(1)).expanduser()).resolve()
    if not target.is_file():
        return match.group()
    if target in stack:
        return f"<!-- import of {match.group(1)} skipped: it would import itself -->"
    if len(stack) > MAX_IMPORT_DEPTH:
        return f"<!-- import of {match.group(1)} skipped: imports nest deeper than {MAX_IMPORT_DEPTH} -->"
    return expand_imports(target, (*stack, target)).strip()


def save_memory(fact: str, env: Mapping[str, str] | None = None) -> Path:
    """Append `fact` as a bullet under the saved-memories section of the global IFLOW.md; returns its path."""
    line = " ".join(fact.split()).removeprefix("- ").strip()
    if not line:
        raise ValueError("save_memory needs a non-empty fact to remember; say what should be kept")
    path = iflow_home(env if env is not None else os.environ) / MEMORY_FILE_NAMES[0]
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = path.read_text().splitlines() if path.exists() else []
    if SAVED_SECTION not in lines:
        if lines and lines[-1].strip():
            lines.append("")
        lines += [SAVED_SECTION, ""]
    start = lines.index(SAVED_SECTION) + 1
    if start < len(lines) and not lines[start].strip():
        start += 1  # keep the blank line under the heading
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    while end > start and not lines[end - 1].strip():
        end -= 1
    lines.insert(end, f"- {line}")
    path.write_text("\n".join(lines) + "\n")
    return path
