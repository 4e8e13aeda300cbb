"""A small rome-bench run folder written by the bench's own writer (runner.write_trial, which also writes
each trial's agent/trajectory.json): two tasks in two domains, two attempts each, one of them an iflow trial
with its chat history, the verdict classes passed, failed, agent_error and infra_error all present."""

from __future__ import annotations

import json
from pathlib import Path

from rome.bench.agents import CommandRecord
from rome.bench.runner import write_trial
from rome.bench.trial import TrialResult

TASKS = {"csv-sales-rollup": "data-processing", "nim-winning-moves": "games"}


def iflow_transcript(task: str) -> list[dict]:
    function = {"name": "run_shell_command", "arguments": json.dumps({"command": "python3 solve.py"})}
    call = {"id": "c1", "type": "function", "function": function}
    return [
        {"role": "system", "content": "You are iFlow."},
        {"role": "user", "content": f"Solve {task}."},
        {"role": "assistant", "content": "Running the solver.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "Output:\nwrote /app/out.csv\nExit code: 0"},
        {"role": "assistant", "content": "Done."},
    ]


def trial(task: str, attempt: int, verdict: str, reward: float, agent: str = "oracle") -> TrialResult:
    result = TrialResult(
        task_id=task, attempt=attempt, agent=agent, category=TASKS[task], difficulty="easy",
        instruction=f"Solve {task}.", reward=reward, passed=verdict == "passed", verdict=verdict,
        cause={"agent_error": "agent crashed", "infra_error": "sandbox lost"}.get(verdict),
        verifier_output="2 passed" if reward else "1 failed", reward_source="reward.txt",
        agent_log="solution output",
    )  # fmt: skip
    result.commands = [
        CommandRecord(phase="agent", command="bash /solution/solve.sh", exit_code=0, duration_sec=1.0,
                      timed_out=False),
        CommandRecord(phase="verifier", command="bash /tests/test.sh", exit_code=0 if reward else 1,
                      duration_sec=2.0, timed_out=False),
    ]  # fmt: skip
    if agent == "iflow":
        result.transcript = iflow_transcript(task)
    return result


def write_bench_run(output: Path) -> Path:
    output.mkdir(parents=True, exist_ok=True)
    for result in (
        trial("csv-sales-rollup", 0, "passed", 1.0),
        trial("csv-sales-rollup", 1, "failed", 0.0, agent="iflow"),
        trial("nim-winning-moves", 0, "agent_error", 0.0),
        trial("nim-winning-moves", 1, "infra_error", 0.0),
    ):
        write_trial(output, result)
    return output
