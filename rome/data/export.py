"""`rome data export-sft`: filtered trajectories as the JSONL that `roll sft` (and the pipeline's SFT warm
start) reads: one {"messages", "tools"} object per line, each assistant message flagged.

- `error` (the error mask): the turn's tool call failed (a result starting "Error: " or a non-zero exit
  code); `roll sft` drops such turns from the loss, so failed-then-fixed steps teach only the fix.
- `relevant` (task-aware relevance): false for a turn that repeats an earlier identical call that had
  succeeded, and for a read-only look (ls, cat, env, ...) at nothing inside the task's workspace (the top
  folder of the paths the instruction names, e.g. /app).
- `--stage 2` (the second SFT stage) keeps only trajectories that were verified by the tests, confirmed by the
  execution replay, have no failed call, and are the shortest ones kept for their task.
"""

from __future__ import annotations

import json
import re
import shlex
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from rome.data.taskset import write_atomic
from rome.data.types import TrajectoryRecord, read_trajectories, tool_steps

READ_ONLY = {
    "ls",
    "cat",
    "head",
    "tail",
    "find",
    "grep",
    "wc",
    "stat",
    "file",
    "pwd",
    "echo",
    "which",
    "env",
    "whoami",
    "id",
    "uname",
    "date",
    "tree",
    "du",
    "df",
    "printenv",
    "hostname",
    "less",
    "more",
}
PATH = re.compile(r"(?<![\w.])/[A-Za-z0-9_.-]+")


class ExportStats(BaseModel):
    source: str
    stage: int
    trajectories_in: int
    exported: int
    assistant_turns: int
    error_turns: int
    irrelevant_turns: int
    mean_turns: float
    by_family: dict[str, int] = Field(default_factory=dict)
    by_difficulty: dict[str, int] = Field(default_factory=dict)
    dropped_by_stage_2: dict[str, int] = Field(default_factory=dict)


def workspace_of(instruction: str) -> set[str]:
    """Top folders of the absolute paths the instruction names (`/app/data/x.csv` -> `/app`)."""
    return {match.group(0) for match in PATH.finditer(instruction)}


def _read_only_outside(command: str, workspace: set[str]) -> bool:
    try:
        words = shlex.split(command, comments=False)
    except ValueError:
        return False
    programs, paths = [], []
    expect_program = True
    for word in words:
        if word in (";", "|", "&&", "||"):
            expect_program = True
            continue
        if expect_program:
            programs.append(word.rsplit("/", 1)[-1])
            expect_program = False
        elif word.startswith("/"):
            paths.append(word)
    if not programs or any(p not in READ_ONLY for p in programs) or re.search(r"[>]", command):
        return False
    # Only absolute paths can lie outside: relative ones (and none at all) are the working directory's.
    return bool(paths) and not any(p == w or p.startswith(w + "/") for p in paths for w in workspace)


def flag_messages(record: TrajectoryRecord) -> list[dict[str, Any]]:
    """The record's messages with `error` and `relevant` on every assistant message."""
    steps = tool_steps(record.messages)
    by_index: dict[int, list] = {}
    for step in steps:
        by_index.setdefault(step.assistant_index, []).append(step)
    workspace = workspace_of(record.instruction)
    succeeded: set[tuple[str, str]] = set()
    flagged: list[dict[str, Any]] = []
    for index, message in enumerate(record.messages):
        message = dict(message)
        if message.get("role") == "assistant":
            calls = by_index.get(index, [])
            error = any(s.failed for s in calls)
            redundant = bool(calls) and all((s.tool, s.raw_arguments) in succeeded for s in calls)
            outside = bool(calls) and all(
                s.command is not None and _read_only_outside(s.command, workspace) for s in calls
            )
            message["error"] = error
            message["relevant"] = not redundant and not outside
            succeeded.update((s.tool, s.raw_arguments) for s in calls if not s.failed)
        flagged.append(message)
    return flagged


def stage_two(records: list[TrajectoryRecord]) -> tuple[list[TrajectoryRecord], dict[str, int]]:
    dropped: Counter[str] = Counter()
    candidates = []
    for record in records:
        steps = tool_steps(record.messages)
        if not record.verifier.passed:
            dropped["not verified"] += 1
        elif record.filters.get("replay") != "kept":
            dropped["not replay-confirmed"] += 1
        elif any(s.failed for s in steps):
            dropped["has a failed call"] += 1
        else:
            candidates.append((record, len(steps)))
    shortest: dict[str, int] = {}
    for record, length in candidates:
        shortest[record.task_id] = min(length, shortest.get(record.task_id, length))
    kept = [record for record, length in candidates if length == shortest[record.task_id]]
    dropped["not the shortest for its task"] += len(candidates) - len(kept)
    return kept, {k: v for k, v in dropped.items() if v}


def export_sft(source: Path, out: Path, stage: int = 1) -> ExportStats:
    if stage not in (1, 2):
        raise ValueError(f"--stage must be 1 or 2, not {stage}")
    records = list(read_trajectories(source))
    dropped: dict[str, int] = {}
    chosen = records
    if stage == 2:
        chosen, dropped = stage_two(records)
    lines = []
    turns = errors = irrelevant = 0
    for record in chosen:
        messages = flag_messages(record)
        assistants = [m for m in messages if m.get("role") == "assistant"]
        turns += len(assistants)
        errors += sum(m["error"] for m in assistants)
        irrelevant += sum(not m["relevant"] for m in assistants)
        example = {
            "messages": messages,
            "tools": record.tools,
            "id": record.id,
            "task_id": record.task_id,
            "family": record.family,
            "difficulty": record.difficulty,
        }
        lines.append(example)
    write_atomic(out, "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))
    stats = ExportStats(
        source=str(source),
        stage=stage,
        trajectories_in=len(records),
        exported=len(chosen),
        assistant_turns=turns,
        error_turns=errors,
        irrelevant_turns=irrelevant,
        mean_turns=turns / len(chosen) if chosen else 0.0,
        by_family=dict(Counter(r.family or "unknown" for r in chosen)),
        by_difficulty=dict(Counter(r.difficulty for r in chosen)),
        dropped_by_stage_2=dropped,
    )
    write_atomic(out.with_name(out.name + ".stats.json"), stats.model_dump_json(indent=2) + "\n")
    return stats
