"""Sessions as JSONL under ``<iflow home>/sessions/``: one header line, then one line per event.

Lines: ``{"type": "session", ...}`` header; ``{"type": "message", "message": {...}}`` for each message of
the history as the agent keeps it; ``{"type": "history", "messages": [...]}`` when compression replaced
the history (resuming starts from the last one); ``{"type": "result", ...}`` at the end of each run.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from iflow.settings import iflow_home
from iflow.types import Message


class SessionError(Exception):
    """A session cannot be found or read; the message says which ones exist."""


@dataclass
class SessionInfo:
    id: str
    path: Path
    cwd: str
    created: str
    model: str
    first_prompt: str = ""


@dataclass
class Session:
    """An open session file. ``messages`` is the history it held when loaded; writes only append."""

    id: str
    path: Path
    cwd: str
    model: str
    messages: list[Message] = field(default_factory=list)

    def append(self, message: Message) -> None:
        self._write({"type": "message", "message": message})

    def replace_history(self, messages: list[Message]) -> None:
        self._write({"type": "history", "messages": list(messages)})

    def record_result(self, result: dict[str, Any]) -> None:
        self._write({"type": "result", **result})

    def _write(self, record: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as file:
            file.write(json.dumps(record, ensure_ascii=False) + "\n")


class SessionStore:
    def __init__(self, home: Path | None = None) -> None:
        self.directory = (home or iflow_home()) / "sessions"

    def create(self, cwd: str, model: str) -> Session:
        self.directory.mkdir(parents=True, exist_ok=True)
        now = datetime.now(UTC)
        session_id = f"{now:%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:8]}"
        session = Session(session_id, self.directory / f"{session_id}.jsonl", cwd, model)
        session._write(
            {"type": "session", "id": session_id, "cwd": cwd, "model": model, "created": now.isoformat()}
        )
        return session

    def list(self, cwd: str | None = None) -> list[SessionInfo]:
        """Sessions, newest first; only those started in ``cwd`` when given."""
        infos = []
        for path in self.directory.glob("*.jsonl"):
            info = _read_info(path)
            if info is not None and (cwd is None or info.cwd == cwd):
                infos.append(info)
        return sorted(infos, key=lambda info: info.created, reverse=True)

    def load(self, session_id: str) -> Session:
        path = self.directory / f"{session_id}.jsonl"
        if not path.exists():
            known = ", ".join(info.id for info in self.list()[:5]) or "none yet"
            raise SessionError(f"no session {session_id!r} in {self.directory}; recent sessions: {known}")
        header: dict[str, Any] = {}
        messages: list[Message] = []
        with path.open(encoding="utf-8") as file:
            for number, line in enumerate(file, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as error:
                    raise SessionError(
                        f"{path} line {number} is not JSON ({error}); the file is damaged"
                    ) from error
                if record["type"] == "session":
                    header = record
                elif record["type"] == "message":
                    messages.append(record["message"])
                elif record["type"] == "history":
                    messages = list(record["messages"])
        return Session(session_id, path, header.get("cwd", ""), header.get("model", ""), messages)

    def latest(self, cwd: str) -> Session:
        infos = self.list(cwd)
        if not infos:
            raise SessionError(
                f"no earlier session in {cwd} to continue; start one with `iflow` or `iflow -p`"
            )
        return self.load(infos[0].id)


def _read_info(path: Path) -> SessionInfo | None:
    header: dict[str, Any] | None = None
    first_prompt = ""
    with path.open(encoding="utf-8") as file:
        for line in file:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                return None
            if record.get("type") == "session":
                header = record
            elif record.get("type") == "message" and record["message"].get("role") == "user":
                content = record["message"].get("content")
                if isinstance(content, str) and not content.startswith("<system-reminder>"):
                    first_prompt = content[:80]
                    break
    if header is None:
        return None
    return SessionInfo(
        header["id"],
        path,
        header.get("cwd", ""),
        header.get("created", ""),
        header.get("model", ""),
        first_prompt,
    )
