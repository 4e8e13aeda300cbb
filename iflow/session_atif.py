"""An iflow session file (``<iflow home>/sessions/<id>.jsonl``) as one ATIF trajectory.

The steps are the session's history as the agent last kept it (after compression, the summary and what
followed); the runs' results add up to the final metrics and are listed in `extra.runs`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import atif

from iflow.atif import build_trajectory, steps_from_messages
from iflow.sessions import SessionError, SessionStore


def _results(path: Path) -> list[dict[str, Any]]:
    results = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise SessionError(
                f"{path} has a line that is not JSON ({error}); the file is damaged"
            ) from error
        if record.get("type") == "result":
            results.append({k: v for k, v in record.items() if k != "type"})
    return results


def session_trajectory(store: SessionStore, session_id: str) -> atif.Trajectory:
    """The ATIF trajectory of a saved session (SessionError if there is no such session)."""
    session = store.load(session_id)
    runs = _results(session.path)
    usage = [run.get("usage") or {} for run in runs]
    metrics = atif.FinalMetrics(
        total_prompt_tokens=sum(u.get("prompt_tokens", 0) for u in usage),
        total_completion_tokens=sum(u.get("completion_tokens", 0) for u in usage),
        total_steps=None,
    )
    return build_trajectory(
        steps_from_messages(session.messages),
        agent_name="iflow",
        model_name=session.model or None,
        session_id=session.id,
        extra={"cwd": session.cwd, "runs": runs},
        final_metrics=metrics if runs else None,
    )
