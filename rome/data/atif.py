"""The data stage's trajectories as ATIF, both ways.

`rome data export-atif`: each record of a trajectory JSONL (collect's or filter's output) as one ATIF file,
the task, verdict and filter verdicts in `extra`, the proxy's per-call token counts in each agent step's
metrics (token ids and logprobs too with `token_ids=True`: they make files large).

`rome data import-atif`: ATIF trajectories written elsewhere (another agent's logs converted to ATIF, a
Harbor run's `agent/trajectory.json`) as trajectory records, so they pass through `rome data filter` and
`rome data export-sft` like the data stage's own teacher's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import atif

from iflow.atif import (
    AtifError,
    build_trajectory,
    messages_from_trajectory,
    read_trajectory,
    steps_from_messages,
    write_trajectory,
)
from rome.data.types import ModelCall, TrajectoryRecord, VerifierResult, write_trajectories

IMPORTED_AGENT_PREFIX = "atif:"


def _metrics(call: ModelCall, token_ids: bool) -> atif.Metrics:
    usage = call.usage or {}
    prompt = usage.get("prompt_tokens", len(call.prompt_token_ids) if call.prompt_token_ids else None)
    completion = usage.get("completion_tokens", len(call.output_token_ids) if call.output_token_ids else None)
    return atif.Metrics(
        prompt_tokens=prompt,
        completion_tokens=completion,
        prompt_token_ids=call.prompt_token_ids if token_ids else None,
        completion_token_ids=call.output_token_ids if token_ids else None,
        logprobs=call.output_logprobs if token_ids else None,
        extra={"weight_version": call.weight_version, "finish_reason": call.finish_reason},
    )


def record_trajectory(record: TrajectoryRecord, token_ids: bool = False) -> atif.Trajectory:
    """One trajectory record as ATIF. The i-th assistant message is the i-th recorded model call when the
    counts agree (they do for records `rome data collect` wrote); otherwise steps carry no call metrics."""
    steps = steps_from_messages(record.messages)  # type: ignore[arg-type]
    agent_steps = [step for step in steps if step.source == "agent"]
    if len(agent_steps) == len(record.calls):
        for step, call in zip(agent_steps, record.calls, strict=True):
            step.metrics = _metrics(call, token_ids)
    trajectory = build_trajectory(
        steps,
        agent_name=record.agent,
        model_name=record.model,
        session_id=record.id,
        extra={
            "task_id": record.task_id,
            "task_path": record.task_path,
            "family": record.family,
            "seed": record.seed,
            "difficulty": record.difficulty,
            "domain": record.domain,
            "attempt": record.attempt,
            "instruction": record.instruction,
            "reward": record.verifier.reward,
            "verifier": record.verifier.model_dump(),
            "agent_error": record.agent_error,
            "duration_s": record.duration_s,
            "filters": record.filters,
        },
    )
    trajectory.agent.tool_definitions = record.tools or None
    return trajectory


def export_atif(records: list[TrajectoryRecord], out: Path, token_ids: bool = False) -> list[Path]:
    """Write each record as `out/<record id>.json`; returns the files written."""
    return [
        write_trajectory(out / f"{_file_name(record.id)}.json", record_trajectory(record, token_ids))
        for record in records
    ]


def _file_name(identifier: str) -> str:
    return "".join(c if c.isalnum() or c in "-_.@" else "_" for c in identifier)


def atif_files(sources: list[Path]) -> list[Path]:
    """The ATIF files named: files as they are, folders searched for *.json (trajectory.json included)."""
    files: list[Path] = []
    for source in sources:
        if source.is_dir():
            found = sorted(p for p in source.rglob("*.json") if not p.name.startswith("."))
            if not found:
                raise AtifError(
                    f"{source} holds no .json file; pass ATIF trajectory files or folders of them"
                )
            files += found
        elif source.is_file():
            files.append(source)
        else:
            raise AtifError(f"{source} does not exist; pass ATIF trajectory files or folders of them")
    return files


def _first_user_text(messages: list[dict[str, Any]]) -> str:
    return next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")


def imported_record(trajectory: atif.Trajectory, origin: Path, index: int) -> TrajectoryRecord:
    """A trajectory record for an ATIF trajectory from elsewhere. Its facts come from `extra` when it holds
    them (as ALE's own ATIF files do), else from the trajectory: the first user message is the
    instruction, the task is named by the file. A trajectory with no reward in `extra` is recorded as not
    verified, so stage-2 export and the replay filter judge it like any unverified one."""
    extra = trajectory.extra or {}
    messages = [dict(m) for m in messages_from_trajectory(trajectory, skip_copied=False)]
    verifier = extra.get("verifier")
    if isinstance(verifier, dict):
        result = VerifierResult.model_validate(verifier)
    elif isinstance(extra.get("reward"), int | float):
        result = VerifierResult(reward=float(extra["reward"]), passed=float(extra["reward"]) >= 1.0)
    else:
        result = VerifierResult(reward=0.0, passed=False, error=f"not verified: imported from {origin}")
    # Harbor keeps a trial's trajectory as <trial>/agent/trajectory.json: the trial folder names the task.
    named = origin.parent.parent.name if origin.name == "trajectory.json" else origin.stem
    task_id = str(extra.get("task_id") or named)
    return TrajectoryRecord(
        id=str(trajectory.session_id or trajectory.trajectory_id or f"{origin.stem}-{index}"),
        task_id=task_id,
        task_path=str(extra.get("task_path") or ""),
        family=extra.get("family"),
        seed=extra.get("seed"),
        difficulty=str(extra.get("difficulty") or "unknown"),
        domain=str(extra.get("domain") or "uncategorized"),
        attempt=int(extra.get("attempt") or 0),
        agent=IMPORTED_AGENT_PREFIX + trajectory.agent.name,
        model=trajectory.agent.model_name or "unknown",
        instruction=str(extra.get("instruction") or _first_user_text(messages)),
        messages=messages,
        tools=list(trajectory.agent.tool_definitions or []),
        verifier=result,
        filters=dict(extra.get("filters") or {}),
    )


def import_atif(sources: list[Path], out: Path) -> list[TrajectoryRecord]:
    """Read every ATIF trajectory under `sources` (each validated with the atif models) and write them as
    trajectory records to `out`; a file that is not ATIF stops the import with its name and problem."""
    records = [
        imported_record(read_trajectory(path), path, index) for index, path in enumerate(atif_files(sources))
    ]
    write_trajectories(out, records)
    return records
