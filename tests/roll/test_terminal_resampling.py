"""Initialized resampling's pure parts: expert steps from solutions and episodes, the start-point schedule,
parallel anchors and crucial-fork detection (hand-computed cases)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from roll.rollout.terminal.resampling.expert import (
    ExpertStep,
    expert_from_messages,
    oracle_expert,
    split_statements,
)
from roll.rollout.terminal.resampling.rollback import SequentialRollback, crucial_fork
from rome.terminal_tasks.task import Task, load_task

SUITE = Path(__file__).resolve().parents[2] / "rome" / "tasks" / "terminal-pro"

SCRIPT = """#!/bin/bash
set -euo pipefail
# make the folder
mkdir -p /app/out

cat > /app/out/a.py <<'PY'
for i in range(3):
    print(i)
PY
for f in /app/*.txt; do
  wc -l "$f"
done
if [ -f /app/x ]; then echo yes; fi
sort /app/in.txt \\
  | uniq -c > /app/out/counts.txt
echo done
"""


def test_split_statements_keeps_heredocs_blocks_and_continuations_whole():
    assert split_statements(SCRIPT) == [
        "mkdir -p /app/out",
        "cat > /app/out/a.py <<'PY'\nfor i in range(3):\n    print(i)\nPY",
        'for f in /app/*.txt; do\n  wc -l "$f"\ndone',
        "if [ -f /app/x ]; then echo yes; fi",
        "sort /app/in.txt \\\n  | uniq -c > /app/out/counts.txt",
        "echo done",
    ]


def test_oracle_expert_is_the_solution_then_a_final_message():
    task = load_task(SUITE / "fix-permissions")
    assert isinstance(task, Task)
    steps = oracle_expert(task)
    assert [step.command is None for step in steps] == [False] * 4 + [True]
    assert all(step.command.startswith("find /srv/www") for step in steps[:4])  # type: ignore[union-attr]
    message = steps[0].assistant_message("c0")
    assert message["tool_calls"][0]["function"]["name"] == "run_shell_command"
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"command": steps[0].command}


def test_expert_from_a_recorded_episode():
    call = {
        "id": "1",
        "type": "function",
        "function": {"name": "run_shell_command", "arguments": '{"command": "ls"}'},
    }
    messages = [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "1", "content": "Output:\na\nExit code: 0"},
        {"role": "assistant", "content": "all done"},
    ]
    assert expert_from_messages(messages) == [
        ExpertStep(command="ls"),
        ExpertStep(command=None, content="all done"),
    ]


def test_sequential_rollback_moves_back_when_the_start_is_learned():
    schedule = SequentialRollback(num_chunks=3, threshold=0.5, min_samples=2)
    assert schedule.current == 2
    schedule.record(2, False)
    schedule.record(2, False)
    assert schedule.current == 2  # 0/2 < 0.5
    schedule.record(2, True)
    assert schedule.current == 2  # 1/3 < 0.5
    schedule.record(2, True)
    assert schedule.current == 1  # 2/4 >= 0.5
    schedule.record(1, True)
    assert schedule.current == 1  # one sample is below min_samples
    schedule.record(1, True)
    assert schedule.current == 0
    schedule.record(0, True)
    schedule.record(0, True)
    assert schedule.current == 0  # never below 0
    assert schedule.rates() == {0: 1.0, 1: 1.0, 2: 0.5}


def test_with_a_window_only_the_latest_episodes_at_a_start_count():
    # The run's case: three failures at start 3 before the policy learned it, then a success.
    history = [False, False, False, True]
    everything = SequentialRollback(num_chunks=5, threshold=0.5, min_samples=1)
    windowed = SequentialRollback(num_chunks=5, threshold=0.5, min_samples=1, window=2)
    for schedule in (everything, windowed):
        schedule.record(4, True)
        assert schedule.current == 3
        for success in history:
            schedule.record(3, success)
    assert everything.current == 3  # 1/4 < 0.5
    assert windowed.current == 2  # the latest two: 1/2 >= 0.5
    assert windowed.rates() == everything.rates() == {3: 0.25, 4: 1.0}  # the table still shows every episode
    # min_samples still holds within the window.
    strict = SequentialRollback(num_chunks=3, threshold=1.0, min_samples=2, window=2)
    strict.record(2, True)
    assert strict.current == 2
    strict.record(2, True)
    assert strict.current == 1
    with pytest.raises(ValueError, match=r"window \(1\) must be at least min_samples \(2\)"):
        SequentialRollback(num_chunks=3, min_samples=2, window=1)


def test_anchors_are_the_current_start_and_those_before_it():
    schedule = SequentialRollback(num_chunks=5)
    assert schedule.anchors(3) == [4, 3, 2]
    assert schedule.anchors(7) == [4, 3, 2, 1, 0, 0, 0]
    with pytest.raises(ValueError, match="at least 1"):
        schedule.anchors(0)


def test_crucial_fork_is_the_largest_jump_in_success():
    assert crucial_fork({0: 0.0, 1: 0.1, 2: 0.8, 3: 0.9}) == 1
    assert crucial_fork({0: 0.0, 1: 0.2, 2: 0.3}) is None  # no jump reaches 0.3
    assert crucial_fork({0: 0.0, 2: 1.0}) is None  # no adjacent start points
    assert crucial_fork({0: 0.5, 1: 0.9, 2: 1.0}, min_gap=0.4) == 0


def test_bad_schedules_are_refused():
    with pytest.raises(ValueError, match="at least one chunk"):
        SequentialRollback(num_chunks=0)
    with pytest.raises(ValueError, match=r"outside 0\.\.2"):
        SequentialRollback(num_chunks=2).record(3, True)


def test_the_ipa_terminal_config_loads_and_rejects_unknown_keys():
    from roll.config import ConfigError, load_config
    from roll.pipeline.config import TrainConfig
    from roll.rollout.terminal.config import TerminalEnvConfig

    configs = Path(__file__).resolve().parents[2] / "configs"
    config = load_config(
        TrainConfig,
        configs / "ipa_terminal.yaml",
        ["env.resampling.rollback.threshold=0.8", "trainer.optimizer.lr=3e-5"],
    )
    env = config.env
    assert isinstance(env, TerminalEnvConfig) and env.task_ids and env.agent.placement == "host"
    assert env.resampling.rollback.threshold == 0.8 and config.trainer.optimizer.lr == 3e-5
    assert config.loss.type == "ipa" and config.steps >= 1
    for task_id in env.task_ids:
        assert isinstance(load_task(SUITE / task_id), Task)
    with pytest.raises(ConfigError, match=r"env\.anchor"):
        load_config(TrainConfig, configs / "ipa_terminal.yaml", ["env.anchor=2"])
    with pytest.raises(ConfigError, match=r"env\.agent\.placement"):
        load_config(TrainConfig, configs / "ipa_terminal.yaml", ["env.agent.placement=cloud"])
    with pytest.raises(ConfigError, match=r"env\.type must be one of 'gem', 'terminal'"):
        load_config(TrainConfig, configs / "ipa_terminal.yaml", ["env.type=terminals"])
    with pytest.raises(
        ConfigError, match=r"rollback\.window \(1\) must be at least rollback\.min_samples \(2\)"
    ):
        load_config(
            TrainConfig,
            configs / "ipa_terminal.yaml",
            ["env.resampling.rollback.window=1", "env.resampling.rollback.min_samples=2"],
        )


def test_the_summary_table_shows_success_by_task_and_start_point_per_evaluation():
    from rich.console import Console

    from roll.rollout.terminal.report import start_point_table

    evals = [
        {"label": "before RL", "by_start": {"t": {"0": 0.0, "1": 0.0, "2": 1.0}}, "crucial_fork": {"t": 1}},
        {"label": "step 2", "by_start": {"t": {"0": 0.0, "1": 1.0, "2": 1.0}}, "crucial_fork": {"t": 0}},
        {"label": "after RL", "by_start": {"t": {"0": 0.5, "1": 1.0, "2": 1.0}}, "crucial_fork": {"t": None}},
        {"label": "failed", "episodes": 0},  # an evaluation that played nothing has no column
    ]
    console = Console(record=True, width=200)
    console.print(start_point_table(evals, "by start"))
    lines = console.export_text().splitlines()
    header = next(line for line in lines if line.startswith("┃"))
    assert [cell.strip() for cell in header.split("┃")[1:-1]] == [
        "task",
        "k",
        "before RL",
        "step 2",
        "after RL",
    ]
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in lines if line.startswith("│")]
    assert rows == [
        ["t", "0", "0.00", "0.00", "0.50"],
        ["", "1", "0.00", "1.00", "1.00"],
        ["", "2", "1.00", "1.00", "1.00"],
        ["", "fork", "1", "0", "-"],
    ]


def test_imitation_trajectory_renders_expert_chunks(tiny_moe: Any):
    from roll.models import render_chat
    from roll.rollout.terminal.resampling.imitation import imitation_trajectory
    from roll.trainer.packing import pack_trajectories

    call = {
        "id": "1",
        "type": "function",
        "function": {"name": "run_shell_command", "arguments": '{"command": "ls"}'},
    }
    messages = [
        {"role": "system", "content": "You are a terminal agent."},
        {"role": "user", "content": "List the files."},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "1", "content": "Output:\na.txt\nExit code: 0"},
        {"role": "assistant", "content": "There is a.txt."},
    ]
    tools = [
        {"type": "function", "function": {"name": "run_shell_command", "parameters": {"type": "object"}}}
    ]
    trajectory = imitation_trajectory(messages, tiny_moe.tokenizer, tools, task_id="t")

    assert [c.expert and c.output_logprobs is None for c in trajectory.chunks] == [True, True]
    assert trajectory.chunks[0].context_ids == render_chat(tiny_moe.tokenizer, messages[:2], tools).token_ids
    assert trajectory.chunks[1].context_ids == render_chat(tiny_moe.tokenizer, messages[:4], tools).token_ids
    first = tiny_moe.tokenizer.decode(trajectory.chunks[0].output_ids)
    assert first.startswith(
        '<tool_call>{"name": "run_shell_command", "arguments": {"command": "ls"}}</tool_call>'
    )
    assert tiny_moe.tokenizer.decode(trajectory.chunks[1].output_ids).startswith("There is a.txt.")
    packed = pack_trajectories([trajectory])
    assert packed.num_chunks == 2 and bool(packed.chunk_expert.all())


def test_roll_train_refuses_bad_terminal_keys_and_roll_agentic_is_gone():
    from typer.testing import CliRunner

    from roll.cli import app

    config = str(Path(__file__).resolve().parents[2] / "configs" / "ipa_terminal.yaml")
    runner = CliRunner()
    refused = runner.invoke(app, ["train", config, "env.resampling.anchors=0"])
    assert refused.exit_code == 2 and "env.resampling.anchors" in refused.output
    assert runner.invoke(app, ["agentic", config]).exit_code == 2  # no such command
