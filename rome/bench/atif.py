"""A rome-bench trial as ATIF: `trials/<task>__<attempt>/agent/trajectory.json`, Harbor's place for it.

An agent that talks (iflow) gives its chat history: the steps are its messages. An agent that only runs
commands (oracle, nop) gives one deterministic agent step per command (`llm_call_count` 0), the agent's
output as the last one's observation. The verifier's run closes the trajectory as a system step, and the
trial's verdict, reward, cause and timings are in `extra`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import atif

from iflow.atif import TRAJECTORY_FILE, build_trajectory, steps_from_messages, write_trajectory
from rome.bench.trial import TrialResult

SHELL_TOOL = "run_shell_command"
OUTPUT_CAP = 100_000


def trial_folder(output: Path, task_id: str, attempt: int) -> Path:
    return output / "trials" / f"{task_id}__{attempt}"


def trajectory_path(output: Path, task_id: str, attempt: int) -> Path:
    return trial_folder(output, task_id, attempt) / "agent" / TRAJECTORY_FILE


def _command_steps(result: TrialResult, first_id: int) -> list[atif.Step]:
    commands = [c for c in result.commands if c.phase == "agent"]
    steps = []
    for index, command in enumerate(commands):
        call_id = f"cmd-{index}"
        last = index == len(commands) - 1
        outcome = f"exit code {command.exit_code}" + (" (timed out)" if command.timed_out else "")
        content = (result.agent_log[-OUTPUT_CAP:] + "\n" if last and result.agent_log else "") + outcome
        steps.append(
            atif.Step(
                step_id=first_id + index,
                source="agent",
                message="",
                llm_call_count=0,
                tool_calls=[
                    atif.ToolCall(
                        tool_call_id=call_id, function_name=SHELL_TOOL, arguments={"command": command.command}
                    )
                ],
                observation=atif.Observation(
                    results=[
                        atif.ObservationResult(
                            source_call_id=call_id,
                            content=content,
                            extra={"exit_code": command.exit_code, "duration_sec": command.duration_sec},
                        )
                    ]
                ),
            )
        )
    if not commands and result.agent_log:
        steps.append(atif.Step(step_id=first_id, source="system", message=result.agent_log[-OUTPUT_CAP:]))
    return steps


def _verifier_step(result: TrialResult, step_id: int) -> atif.Step:
    runs = [c for c in result.commands if c.phase == "verifier"]
    return atif.Step(
        step_id=step_id,
        source="system",
        message=f"verifier: reward {result.reward:g} ({result.verdict}"
        + (f", {result.cause}" if result.cause else "")
        + ")",
        observation=atif.Observation(
            results=[
                atif.ObservationResult(
                    content=result.verifier_output[-OUTPUT_CAP:],
                    extra={
                        "commands": [c.command for c in runs],
                        "exit_codes": [c.exit_code for c in runs],
                        "reward_source": result.reward_source,
                    },
                )
            ]
        ),
        extra={"phase": "verifier"},
    )


def trial_trajectory(result: TrialResult, messages: list[dict[str, Any]] | None = None) -> atif.Trajectory:
    """The trial's ATIF trajectory: the agent's messages when it kept any, else its commands."""
    if messages:
        steps = steps_from_messages(messages)  # type: ignore[arg-type]
    else:
        steps = [atif.Step(step_id=1, source="user", message=result.instruction)]
        steps += _command_steps(result, first_id=2)
    steps.append(_verifier_step(result, len(steps) + 1))
    return build_trajectory(
        steps,
        agent_name=result.agent,
        model_name=result.model,
        session_id=f"{result.task_id}__{result.attempt}",
        extra={
            "task_id": result.task_id,
            "attempt": result.attempt,
            "domain": result.category,
            "difficulty": result.difficulty,
            "instruction": result.instruction,
            "reward": result.reward,
            "passed": result.passed,
            "verdict": result.verdict,
            "cause": result.cause,
            "failure_mode": result.failure_mode,
            "error": result.error,
            "timings": result.timings.model_dump(),
            "steps": [
                {"name": s.name, "reward": s.reward, "verdict": s.verdict, "cause": s.cause}
                for s in result.steps
            ],
        },
    )


def write_trial_trajectory(output: Path, result: TrialResult) -> Path:
    """Write the trial's `agent/trajectory.json` under the run folder `output`."""
    path = trajectory_path(output, result.task_id, result.attempt)
    return write_trajectory(path, trial_trajectory(result, result.transcript or None))
