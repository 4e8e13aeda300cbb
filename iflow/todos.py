"""The todo list, persisted per project under ``<iflow home>/todos/`` so it survives sessions."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from iflow.settings import iflow_home
from iflow.types import TodoItem

STATUS_MARKS = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}


def project_key(project: str) -> str:
    """A file name for a project: readable base name plus a hash of its full path."""
    digest = hashlib.sha256(project.encode()).hexdigest()[:12]
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(project).name) or "root"
    return f"{name}-{digest}"


class TodoStore:
    def __init__(self, project: str, home: Path | None = None) -> None:
        self.project = project
        self.path = (home or iflow_home()) / "todos" / f"{project_key(project)}.json"

    def load(self) -> list[TodoItem]:
        if not self.path.exists():
            return []
        try:
            data = json.loads(self.path.read_text())
        except json.JSONDecodeError:
            return []
        return list(data.get("todos", []))

    def save(self, todos: list[TodoItem]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"project": self.project, "todos": todos}, indent=2))
        tmp.replace(self.path)

    def render(self) -> str:
        todos = self.load()
        if not todos:
            return "(no todos)"
        return "\n".join(f"{STATUS_MARKS.get(t['status'], '[?]')} {t['id']}. {t['content']}" for t in todos)
