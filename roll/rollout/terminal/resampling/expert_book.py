"""Each task's current expert trajectory, refreshed from the policy's own successes.

A task starts with its given expert (its oracle, or a recorded trajectory of an expert). When an episode
started at point k succeeds, the expert's first k steps (replayed) followed by the policy's own steps (its
answers, as recorded by the proxy) solved the task: that is a candidate expert. It replaces the current one
when it is better: fewer steps, or as many with more of them the policy's own (an earlier start). Later
prefixes, anchors and the imitation fallback then use it, so the policy learns to continue from what it writes
itself, and a shorter path shortens the rollback.

A candidate is only taken when it can be replayed and every step of the policy's worked: each call must be a
shell call (the prefill replays shell commands) with JSON arguments whose recorded result says exit code 0.
Without the last rule a junk command after the replayed prefix did the work (an echoed tool response, a typo)
would become the expert, and imitation would teach it. The book is persisted as `<dir>/<task id>.json` after
every refresh (the task folder's fingerprint, current steps, their origin, and the history of refreshes), and
`load_saved` starts a new run from those files where they fit the task (`expert_store`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from iflow.types import TOOL_ERROR_PREFIX
from rock.proxy.types import EpisodeRecord
from roll.rollout.terminal.resampling.expert import FINAL_MESSAGE, SHELL_TOOL, ExpertStep
from roll.rollout.terminal.resampling.expert_store import (
    ORACLE,
    ExpertStart,
    SavedExpertError,
    TaskExpert,
    expert_json,
    load_saved_expert,
)

SHELL_SUCCEEDED = re.compile(r"\nExit code: 0\s*$")


def tool_results(record: EpisodeRecord) -> dict[str, str]:
    """Every tool result the agent sent back in the episode's later calls, by tool call id."""
    return {
        str(message["tool_call_id"]): str(message.get("content") or "")
        for recorded in record.chunks
        for message in recorded.messages
        if message.get("role") == "tool" and message.get("tool_call_id")
    }


def _succeeded(result: str | None) -> bool:
    return (
        result is not None
        and not result.startswith(TOOL_ERROR_PREFIX)
        and bool(SHELL_SUCCEEDED.search(result))
    )


def policy_steps(record: EpisodeRecord) -> list[ExpertStep] | None:
    """The policy's steps in a recorded episode (one per shell call, one per final answer), or None when a
    call cannot be replayed as a shell command (another tool, or arguments that are not a command) or its
    result does not show it worked (an error, a non-zero exit code, or no result recorded)."""
    results = tool_results(record)
    steps: list[ExpertStep] = []
    for recorded in record.chunks:
        message = recorded.answer
        calls = message.get("tool_calls") or []
        content = message.get("content") or ""
        if not calls:
            steps.append(ExpertStep(command=None, content=content or FINAL_MESSAGE))
            continue
        for index, call in enumerate(calls):
            function = call.get("function") or {}
            if function.get("name") != SHELL_TOOL:
                return None
            try:
                arguments = json.loads(function.get("arguments") or "")
            except ValueError:
                return None
            command = arguments.get("command") if isinstance(arguments, dict) else None
            if not isinstance(command, str) or not command.strip():
                return None
            if not _succeeded(results.get(str(call.get("id")))):
                return None
            steps.append(ExpertStep(command=command, content=content if index == 0 else ""))
    return steps


class ExpertBook:
    """The current expert of every task; `offer` a successful episode to refresh one."""

    def __init__(
        self,
        given: dict[str, list[ExpertStep]],
        folder: Path | None = None,
        fingerprints: dict[str, str] | None = None,
        labels: dict[str, str] | None = None,
    ) -> None:
        """`given`: every task's expert to start from; `labels`: where a task's given expert comes from, when
        not its oracle solution. `fingerprints`: per task, its folder's `task_fingerprint`, saved with its
        expert so that a later run can tell whether the saved expert was made on the same task files."""
        self.folder = folder
        self.fingerprints = fingerprints or {}
        self.labels = labels or {}
        self.tasks = {
            task_id: TaskExpert(list(steps), [ORACLE] * len(steps)) for task_id, steps in given.items()
        }

    def path(self, task_id: str) -> Path | None:
        return None if self.folder is None else self.folder / f"{task_id}.json"

    def load_saved(self) -> dict[str, ExpertStart]:
        """Start every task from its saved expert where one exists and fits the task (same fingerprint,
        well-formed), else from its oracle; per task, which one and why not the saved one."""
        starts = {}
        for task_id, first in self.tasks.items():
            path, problem = self.path(task_id), None
            fingerprint = self.fingerprints.get(task_id)
            if path is not None and path.exists():
                try:
                    if fingerprint is None:
                        raise SavedExpertError("the task's fingerprint is unknown, so it cannot be checked")
                    self.tasks[task_id] = load_saved_expert(path, fingerprint)
                except SavedExpertError as error:
                    problem = str(error)
            expert = self.tasks[task_id]
            source = self.labels.get(task_id, ORACLE) if expert is first else "saved"
            starts[task_id] = ExpertStart(task_id, source, path, len(expert.steps), expert.native, problem)
        return starts

    def current(self, task_id: str) -> TaskExpert:
        """The task's expert now (never changed in place: a refresh replaces it, so this is a snapshot)."""
        return self.tasks[task_id]

    def offer(
        self, task_id: str, base: TaskExpert, start: int, record: EpisodeRecord, round_index: int
    ) -> bool:
        """Consider the successful episode `record` that started after `base.steps[:start]` (`base`: the
        task's expert when the episode began; the current one may have changed since, when several episodes
        of a round succeed). True when it became the task's expert."""
        own = policy_steps(record)
        if not own:
            return False
        current = self.tasks[task_id]
        steps = [*base.steps[:start], *own]
        origins = [*base.origins[:start], *[record.episode_id] * len(own)]
        candidate = TaskExpert(steps, origins, current.refreshes)
        if (len(steps), -candidate.native) >= (len(current.steps), -current.native):
            return False
        candidate.refreshes = [
            *current.refreshes,
            {
                "round": round_index,
                "episode_id": record.episode_id,
                "start": start,
                "steps": len(steps),
                "previous_steps": len(current.steps),
                "policy_steps": len(own),
            },
        ]
        self.tasks[task_id] = candidate
        self.save(task_id)
        return True

    def save(self, task_id: str) -> None:
        path = self.path(task_id)
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        saved = expert_json(self.tasks[task_id], self.fingerprints.get(task_id))
        path.write_text(json.dumps(saved, indent=2))

    def summary(self) -> dict[str, dict[str, Any]]:
        """Per task: the expert's length, how many steps are the policy's, and its refreshes."""
        return {
            task_id: {
                "steps": len(expert.steps),
                "policy_steps": expert.native,
                "refreshes": expert.refreshes,
            }
            for task_id, expert in self.tasks.items()
        }
