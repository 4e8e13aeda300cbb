"""A small `roll train` run folder written by the run's own writers (RunLog, the episode writer): what a
terminal run with held-out tasks leaves in runs/<name>/, without training anything.

Two held-out tasks played at three evaluations (base, after SFT, after RL): `csv-total` is lost, lost, won
(RL gained it); `word-count` is won, won, lost (RL dropped it). Training episodes start at expert step k.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from roll.pipeline.episodes import EpisodeLogConfig, save_eval_episodes, save_train_sample
from roll.pipeline.tracking import RunLog, episode_metrics
from roll.types import Chunk, Trajectory

HELD_OUT = ["csv-total", "word-count"]
OUTCOMES = {"base": (0.0, 1.0), "after SFT": (0.0, 1.0), "after RL": (1.0, 0.0)}
SYSTEM = {"role": "system", "content": "You are iFlow, a terminal agent."}


def shell_turn(call_id: str, command: str, output: str, code: int) -> list[dict[str, Any]]:
    function = {"name": "run_shell_command", "arguments": json.dumps({"command": command})}
    call = {"id": call_id, "type": "function", "function": function}
    return [
        {"role": "assistant", "content": f"Running {command.split()[0]}.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": f"Output:\n{output}\nExit code: {code}"},
    ]


def episode(task: str, start: int, won: bool, version: int, expert_steps: int = 0) -> Trajectory:
    """An episode as the terminal env manager returns it: chunks of the policy's calls (after `start`
    expert steps prefilled into the history), the transcript, and the manager's metadata."""
    transcript: list[dict[str, Any]] = [SYSTEM, {"role": "user", "content": f"Solve {task} in /app."}]
    for step in range(expert_steps):
        transcript += shell_turn(f"expert-{step}", f"cat /app/input-{step}.txt", "1 2 3", 0)
    transcript += shell_turn("call-a", "ls /app", "input.txt", 0)
    transcript += shell_turn(
        "call-b", "python3 solve.py", "Traceback: boom" if not won else "6", 0 if won else 1
    )
    transcript.append({"role": "assistant", "content": "Done." if won else "I could not solve it."})
    chunks = [
        Chunk(context_ids=list(range(1, 20 + 10 * i)), output_ids=[7, 8, 9, 10][: 2 + i % 3],
              output_logprobs=[-0.1, -0.2, -0.3, -0.4][: 2 + i % 3], weight_version=version,
              error=(i == 1 and not won), relevant=(i != 0))
        for i in range(3)
    ]  # fmt: skip
    return Trajectory(
        chunks=chunks,
        reward=1.0 if won else 0.0,
        task_id=task,
        group_id=f"g-{task}-{start}",
        metadata={
            "seed": HELD_OUT.index(task) if task in HELD_OUT else 0,
            "index": 0, "task": task, "start": start, "success": won, "turns": len(chunks),
            "end": "completed", "format_errors": 0, "truncated_outputs": 0,
            "output_tokens": sum(len(c.output_ids) for c in chunks), "gen_s": 0.5, "env_s": 1.0,
            "transcript": transcript,
        },
    )  # fmt: skip


def write_run(run_dir: Path, steps: int = 3, token_ids: bool = False) -> Path:
    """Write the run folder; returns it."""
    config = EpisodeLogConfig(train_per_step=2, token_ids=token_ids)
    log = RunLog(run_dir, resume_step=None)
    env = {"type": "terminal", "task_ids": ["count-lines"], "eval_task_ids": HELD_OUT}
    (run_dir / "config.json").write_text(json.dumps({"name": run_dir.name, "env": env}))
    try:
        for label, step in (("base", 0), ("after SFT", 0), ("after RL", steps)):
            played = [
                episode(task, 0, won == 1.0, step)
                for task, won in zip(HELD_OUT, OUTCOMES[label], strict=True)
            ]
            log.log_eval({
                "step": step, "label": label, **episode_metrics(played), "failed": 0,
                "won_seeds": sorted(f"{t.task_id}@0" for t in played if t.metadata["success"]),
                "seed_rewards": {f"{t.task_id}@0": t.reward for t in played},
                "by_start": {t.task_id: {"0": t.reward} for t in played},
            })  # fmt: skip
            save_eval_episodes(run_dir, label, played, config)
        for step in range(1, steps + 1):
            batch = [episode("count-lines", k, won=(k + step) % 2 == 0, version=step - 1, expert_steps=k)
                     for k in (0, 1, 2)]  # fmt: skip
            save_train_sample(run_dir, step, batch, config)
            log.log_step({
                "step": step, "version": step, **episode_metrics(batch, step - 1),
                "train/loss": 0.5 / step, "train/entropy/mean": 1.2 - 0.1 * step, "agent_timeouts": step % 2,
            })  # fmt: skip
    finally:
        log.close()
    return run_dir
