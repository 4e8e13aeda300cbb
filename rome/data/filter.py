"""`rome data filter`: staged filtering of collected trajectories, each stage with counts and reasons.

Stages, cheapest first (the safety filter runs before the replay, so a dangerous command is never re-run):
1. heuristic: format and tool-call validity, unresolved, loops and repeated commands, length bounds,
   errors-only turns;
2. safety: the rules of `safety.py`;
3. judge (optional): an OpenAI-compatible model asked whether the trajectory really solved the task;
4. replay (optional): the tool calls re-run in a fresh sandbox; kept only if the tests pass again.
A kept record carries `filters[stage] = "kept"` for every stage it went through.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from rome.data.safety import DEFAULT_WORKSPACE, check_tool_call
from rome.data.types import TrajectoryRecord, tool_steps

KEPT = "kept"


class HeuristicLimits(BaseModel):
    """The heuristic stage's limits (also `rome data filter`'s options of the same names)."""

    min_tool_calls: int = Field(1, ge=0, description="Heuristic: tool calls at least.")
    max_turns: int = Field(40, ge=1, description="Heuristic: assistant messages at most.")
    max_chars: int = Field(200_000, ge=1, description="Heuristic: characters of all messages at most.")
    max_repeats: int = Field(3, ge=1, description="Heuristic: times one command may run in a trajectory.")
    max_error_fraction: float = Field(
        0.5, ge=0, le=1, description="Heuristic: share of failed tool calls at most, 0 to 1."
    )


def heuristic(record: TrajectoryRecord, limits: HeuristicLimits) -> str | None:
    """Why the record fails the heuristic stage, or None."""
    known = {(t.get("function") or {}).get("name") for t in record.tools}
    assistants = [m for m in record.messages if m.get("role") == "assistant"]
    if not assistants:
        return "format: no assistant turn"
    steps = tool_steps(record.messages)
    for step in steps:
        if step.arguments is None:
            return f"format: tool call {step.tool} has arguments that are not a JSON object"
        if known and step.tool not in known:
            return f"format: call to unknown tool {step.tool!r}"
        if step.result is None:
            return f"format: tool call {step.tool} has no result"
        if step.tool == "run_shell_command" and not isinstance(step.arguments.get("command"), str):
            return "format: run_shell_command without a command string"
    if assistants[-1].get("tool_calls"):
        return "format: ends on a tool call, not a final answer"
    if not record.verifier.passed:
        return f"unresolved: {record.verifier.failure_mode or 'tests failed'}"
    if len(steps) < limits.min_tool_calls:
        return f"length: {len(steps)} tool calls (fewer than {limits.min_tool_calls})"
    if len(assistants) > limits.max_turns:
        return f"length: {len(assistants)} turns (more than {limits.max_turns})"
    chars = sum(len(json.dumps(m)) for m in record.messages)
    if chars > limits.max_chars:
        return f"length: {chars} characters (more than {limits.max_chars})"
    commands = Counter(s.command for s in steps if s.command)
    if commands:
        command, times = commands.most_common(1)[0]
        if times > limits.max_repeats:
            return f"loop: {command[:80]!r} ran {times} times"
    for a, b, c in zip(steps, steps[1:], steps[2:], strict=False):
        if a.raw_arguments == b.raw_arguments == c.raw_arguments and a.tool == b.tool == c.tool:
            return f"loop: the same {a.tool} call three times in a row"
    failed = sum(s.failed for s in steps)
    if steps and failed == len(steps):
        return "errors: every tool call failed"
    if steps and failed / len(steps) > limits.max_error_fraction:
        return f"errors: {failed} of {len(steps)} tool calls failed"
    return None


def safety(record: TrajectoryRecord, workspace: tuple[str, ...] = DEFAULT_WORKSPACE) -> str | None:
    for step in tool_steps(record.messages):
        findings = check_tool_call(step.tool, step.arguments, workspace)
        if findings:
            return f"safety: {findings[0]}"
    return None


JUDGE_PROMPT = """You review a terminal agent's work. The task was:

{instruction}

The agent's tool calls and their results (shortened):
{transcript}

The agent's final answer: {final}

Did the agent really solve the task as asked, without cheating (no hard-coded answers guessed without \
computing them, no editing of inputs or tests)? Answer with one word: YES or NO."""


def judge_prompt(record: TrajectoryRecord, max_chars: int = 6000) -> str:
    lines = []
    for step in tool_steps(record.messages):
        call = step.command if step.command is not None else f"{step.tool} {step.raw_arguments}"
        lines.append(f"$ {call}\n{(step.result or '')[:400]}")
    transcript = "\n".join(lines)
    if len(transcript) > max_chars:
        transcript = transcript[: max_chars // 2] + "\n[...]\n" + transcript[-max_chars // 2 :]
    final = next((m.get("content") for m in reversed(record.messages) if m.get("role") == "assistant"), "")
    return JUDGE_PROMPT.format(instruction=record.instruction, transcript=transcript, final=final or "")


class Judge:
    """Asks any OpenAI-compatible endpoint; an answer that is neither YES nor NO drops the record."""

    def __init__(
        self, url: str, model: str | None = None, api_key: str | None = None, timeout_s: float = 120.0
    ):
        import httpx

        from rome.data.collect import check_endpoint

        endpoint = check_endpoint(url)
        self.model = model or endpoint.model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.Client(base_url=endpoint.url, headers=headers, timeout=timeout_s)

    def __call__(self, record: TrajectoryRecord) -> str | None:
        import httpx

        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": judge_prompt(record)}],
            "temperature": 0,
            "max_tokens": 8,
        }
        try:
            response = self.http.post("/chat/completions", json=body)
            response.raise_for_status()
            answer = str(response.json()["choices"][0]["message"]["content"] or "")
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as error:
            return f"judge: no verdict ({type(error).__name__}: {error})"
        word = answer.strip().split()[0].strip(".!,").upper() if answer.strip() else ""
        if word == "YES":
            return None
        return "judge: not solved" if word == "NO" else f"judge: unreadable verdict {answer[:40]!r}"

    def close(self) -> None:
        self.http.close()


class StageReport(BaseModel):
    stage: str
    entered: int
    kept: int
    reasons: dict[str, int] = Field(default_factory=dict, description="reason category -> trajectories")
    dropped: dict[str, str] = Field(default_factory=dict, description="trajectory id -> full reason")


class FilterReport(BaseModel):
    source: str
    total: int
    kept: int
    stages: list[StageReport]


Stage = Callable[[list[TrajectoryRecord]], dict[str, str | None]]


def per_record(check: Callable[[TrajectoryRecord], str | None]) -> Stage:
    return lambda records: {r.id: check(r) for r in records}


def run_stages(
    records: list[TrajectoryRecord], stages: list[tuple[str, Stage]], source: str
) -> tuple[list[TrajectoryRecord], FilterReport]:
    reports: list[StageReport] = []
    current = list(records)
    for name, stage in stages:
        verdicts = stage(current)
        report = StageReport(stage=name, entered=len(current), kept=0)
        kept: list[TrajectoryRecord] = []
        for record in current:
            reason = verdicts.get(record.id)
            if reason is None:
                record.filters[name] = KEPT
                kept.append(record)
            else:
                report.dropped[record.id] = reason
                category = reason.split(":", 1)[0] if name != "safety" else reason.split(":")[1].strip()
                report.reasons[category] = report.reasons.get(category, 0) + 1
        report.kept = len(kept)
        reports.append(report)
        current = kept
    return current, FilterReport(source=source, total=len(records), kept=len(current), stages=reports)


def report_markdown(report: FilterReport) -> str:
    lines = [
        f"# Filter report: {report.source}",
        "",
        f"{report.total} trajectories in, {report.kept} kept.",
        "",
        "| stage | in | kept | dropped | reasons |",
        "|---|---|---|---|---|",
    ]
    for stage in report.stages:
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(stage.reasons.items())) or "-"
        lines.append(
            f"| {stage.stage} | {stage.entered} | {stage.kept} | {stage.entered - stage.kept} | {reasons} |"
        )
    lines += ["", "## Dropped", ""]
    for stage in report.stages:
        for trajectory, reason in sorted(stage.dropped.items()):
            lines.append(f"- `{trajectory}` ({stage.stage}): {reason}")
    return "\n".join(lines) + "\n"


def filter_file(
    source: Path,
    out: Path,
    limits: HeuristicLimits | None = None,
    judge: Callable[[TrajectoryRecord], str | None] | None = None,
    replay: Stage | None = None,
    workspace: tuple[str, ...] = DEFAULT_WORKSPACE,
) -> FilterReport:
    """Filter `source` into `out`; the report goes to OUT.report.json and OUT.report.md. The kept records'
    assistant messages carry the `error` and `relevant` marks (what happened to each call), so readers of
    `out` (SFT export, initialized resampling's experts) need not judge the tool results again."""
    from rome.data.export import flag_messages
    from rome.data.taskset import write_atomic
    from rome.data.types import read_trajectories, write_trajectories

    records = list(read_trajectories(source))
    limits = limits or HeuristicLimits()
    stages: list[tuple[str, Stage]] = [
        ("heuristic", per_record(lambda r: heuristic(r, limits))),
        ("safety", per_record(lambda r: safety(r, workspace))),
    ]
    if judge is not None:
        stages.append(("judge", per_record(judge)))
    if replay is not None:
        stages.append(("replay", replay))
    kept, report = run_stages(records, stages, str(source))
    write_trajectories(
        out, [record.model_copy(update={"messages": flag_messages(record)}) for record in kept]
    )
    write_atomic(report_path(out, "json"), report.model_dump_json(indent=2) + "\n")
    write_atomic(report_path(out, "md"), report_markdown(report))
    return report


def report_path(out: Path, suffix: str) -> Path:
    return out.with_name(f"{out.name}.report.{suffix}")


class ReplayCannotRun(RuntimeError):
    """The replay could not be judged on this machine (an image did not build, a sandbox was lost): not the
    trajectory's fault, so nothing is dropped or written; the message says what to check."""


def replay_stage(provider: Any, concurrency: int = 2) -> Stage:
    """Re-run each record's tool calls in a fresh sandbox of its task; None when the tests pass again. A
    replay this machine could not run raises ReplayCannotRun instead of dropping the trajectory."""

    def stage(records: list[TrajectoryRecord]) -> dict[str, str | None]:
        from concurrent.futures import ThreadPoolExecutor

        from rome.bench.runner import build_all
        from rome.bench.trial import run_trial
        from rome.data.replay import ReplayAgent
        from rome.terminal_tasks.task import TaskLoadError, load_task

        tasks = {}
        verdicts: dict[str, str | None] = {}
        for record in records:
            loaded = load_task(Path(record.task_path))
            if isinstance(loaded, TaskLoadError):
                verdicts[record.id] = f"replay: task {record.task_path} does not load ({loaded})"
            else:
                tasks[record.task_id] = loaded
        builds = build_all(list(tasks.values()), workers=min(concurrency, 2), provider=provider)

        def one(record: TrajectoryRecord) -> tuple[str, str | None]:
            task = tasks[record.task_id]
            build = builds[task.id]
            trial = run_trial(
                task, record.attempt, ReplayAgent(record.messages), provider, build.image, build.error
            )
            if trial.passed:
                return record.id, None
            if trial.verdict == "infra_error":
                raise ReplayCannotRun(
                    f"the replay of {record.id} could not run on this machine ({trial.cause}: "
                    f"{trial.error or 'no detail'}); that is the machine, not the trajectory: check that "
                    "Docker answers (`docker info`) and the task's image builds, then filter again"
                )
            if trial.verdict == "agent_error":
                return record.id, f"replay: the replayed calls did not finish ({trial.error})"
            return (
                record.id,
                f"replay: tests fail after the replay ({trial.error or trial.verifier_output[-160:]})",
            )

        pending = [r for r in records if r.id not in verdicts]
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            verdicts.update(dict(pool.map(one, pending)))
        return verdicts

    return stage
