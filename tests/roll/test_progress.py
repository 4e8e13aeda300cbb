"""Progress wherever a run is watched: a live bar in a terminal, one plain line per step and eval in a log."""

from __future__ import annotations

import io
import re
from typing import Any

from rich.console import Console

from roll.pipeline.display import eval_line, step_line
from roll.progress import StepProgress

LONG_INFO = "reward +0.250 · success 25% · " + "x" * 150  # longer than any console is wide


def test_without_a_terminal_every_update_is_one_plain_line() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=80)
    with StepProgress(console, total=3, start=1, name="step") as progress:
        progress.update(2, LONG_INFO)
        progress.update(3, "[bold]not markup[/bold]")
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert re.fullmatch(r"step 2/3 \[\d+s\] " + re.escape(LONG_INFO), lines[0])
    assert re.fullmatch(r"step 3/3 \[\d+s\] \[bold\]not markup\[/bold\]", lines[1])


def test_in_a_terminal_the_bar_is_live_and_writes_no_plain_lines() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=200)
    with StepProgress(console, total=3, start=0, name="SFT step") as progress:
        progress.update(1, "loss 1.2345")
    text = out.getvalue()
    assert "loss 1.2345" in text and "1/3" in text
    assert "\x1b[" in text  # drawn with terminal control sequences
    assert not re.search(r"SFT step 1/3 \[\d+s\]", text)


def test_eval_line_says_what_was_won_out_of_what_was_played() -> None:
    record = {
        "step": 0,
        "label": "after SFT",
        "episodes": 64,
        "success": 52 / 64,
        "reward": 0.8125,
        "turns": 3.25,
        "failed": 0,
        "time_s": 95.4,
    }
    assert eval_line(record) == (
        "eval after SFT (step 0): success 81% (52/64) · reward +0.812 · 3.2 turns · 95s"
    )
    record |= {"episodes": 62, "success": 31 / 62, "failed": 2}
    assert eval_line(record) == (
        "eval after SFT (step 0): success 50% (31/62) · reward +0.812 · 3.2 turns · 2 failed to run · 95s"
    )
    nothing = {"step": 4, "label": "after RL", "episodes": 0, "failed": 64, "time_s": 3.0}
    assert eval_line(nothing) == "eval after RL (step 4): no episode finished (64 failed to run)"


def test_step_line_says_how_many_episodes_failed_to_run() -> None:
    record = {
        "reward": 0.25,
        "success": 0.25,
        "samples_per_s": 1.5,
        "staleness_mean": 0.5,
        "time_rollout_s": 10.0,
        "time_train_s": 5.0,
        "time_sync_s": 1.0,
        "episode_gen_s": 3.0,
        "episode_env_s": 2.0,
        "buffer/infra_failed_step": 0,
    }
    line = step_line(record)
    assert line == (
        "reward +0.250 · success 25% · 1.50 samples/s · staleness 0.50 · rollout 10.0s train 5.0s sync 1.0s"
        " · gen/env per episode 3.0/2.0s"
    )
    assert step_line(record | {"buffer/infra_failed_step": 3}) == line + " · 3 episode(s) failed to run"
    ended = record | {"agent_timeouts": 2, "agent_errors": 1}
    assert step_line(ended) == line + " · 2 agent timeout(s) · 1 agent error(s)"


def test_episode_metrics_count_how_terminal_episodes_ended() -> None:
    from roll.pipeline.tracking import episode_metrics
    from roll.types import Chunk, Trajectory

    def episode(end: str | None) -> Trajectory:
        metadata = {
            "success": end == "completed",
            "turns": 2,
            "format_errors": 0,
            "output_tokens": 10,
            "truncated_outputs": 0,
            "gen_s": 1.0,
            "env_s": 1.0,
            **({"end": end} if end else {}),
        }
        chunk = Chunk(context_ids=[1], output_ids=[2], weight_version=0)
        return Trajectory(chunks=[chunk], reward=1.0, metadata=metadata)

    ends = ["completed", "agent_timeout", "agent_timeout", "agent_error", None]  # None: a GEM episode
    metrics = episode_metrics([episode(end) for end in ends])
    assert (metrics["episodes"], metrics["agent_timeouts"], metrics["agent_errors"]) == (5, 2, 1)


def test_episode_metrics_split_terminal_success_by_start_point() -> None:
    from roll.pipeline.tracking import episode_metrics
    from roll.types import Chunk, Trajectory

    def episode(success: bool, **extra: object) -> Trajectory:
        metadata = {
            "success": success,
            "turns": 1,
            "format_errors": 0,
            "output_tokens": 5,
            "truncated_outputs": 0,
            "gen_s": 1.0,
            "env_s": 1.0,
            **extra,
        }
        chunk = Chunk(context_ids=[1], output_ids=[2], weight_version=0)
        return Trajectory(chunks=[chunk], reward=float(success), metadata=metadata)

    outcomes = [(0, True), (2, True), (0, False), (2, True), (2, False)]
    batch = [episode(won, start=start) for start, won in outcomes]
    batch.append(episode(True, start=2, imitation=True))  # the imitation fallback is no episode
    metrics = episode_metrics(batch)
    by_start = {key: value for key, value in metrics.items() if "_by_start/" in key}
    assert by_start == {
        "episodes_by_start/0": 2,
        "success_by_start/0": 0.5,
        "episodes_by_start/2": 3,
        "success_by_start/2": 2 / 3,
    }
    assert not any("_by_start/" in key for key in episode_metrics([episode(True)]))  # a GEM episode


def summary_config(terminal: bool) -> Any:
    from roll.config import load_config
    from roll.pipeline.config import TrainConfig
    from roll.rollout.terminal.config import TerminalEnvConfig

    config = load_config(TrainConfig, "configs/gem_guess_the_number.yaml")
    if not terminal:
        return config
    env = TerminalEnvConfig(task_ids=["fix-permissions"], eval_task_ids=["semver-sort"])
    return config.model_copy(update={"env": env})


def summary_rows(episodes: int = 64) -> list[dict[str, Any]]:
    row = {"reward": 0.5, "format_error_rate": 0.25, "turns": 13.0, "failed": 2, "agent_timeouts": 17}
    row |= {"agent_errors": 1, "episodes": 64, "success": 52 / 64}
    labels = (("base", 0), ("after SFT", 0), ("step 100", 100), ("after RL", 120))
    rows = [row | {"label": label, "step": step} for label, step in labels]
    rows[-1] |= {"episodes": episodes, "success": 1.0}
    return rows


def render_summary(terminal: bool, rows: list[dict[str, Any]], width: int) -> list[str]:
    from roll.pipeline.display import print_summary

    out = io.StringIO()
    print_summary(Console(file=out, width=width), rows, summary_config(terminal))
    settings, *lines = out.getvalue().splitlines()
    assert settings.startswith("Eval success on ")  # one plain line, whatever the width: logs keep it whole
    return lines


def cells(lines: list[str], label: str) -> list[str]:
    line = next(line for line in lines if line.startswith(f"│ {label} "))
    return [cell.strip() for cell in line.split("│")[1:-1]]


def test_the_summary_table_is_whole_at_80_columns_with_each_env_kinds_failures() -> None:
    gem = render_summary(terminal=False, rows=summary_rows(), width=80)
    terminal = render_summary(terminal=True, rows=summary_rows(), width=80)
    for lines, headers in (
        (gem, ["eval", "step", "success", "reward", "format errors", "turns", "failed to run"]),
        (
            terminal,
            ["eval", "step", "success", "reward", "turns", "failed to run", "agent timeouts / errors"],
        ),
    ):
        assert all(len(line) <= 80 for line in lines) and not any("…" in line for line in lines)
        top = next(i for i, line in enumerate(lines) if line.startswith("┏"))
        bottom = next(i for i, line in enumerate(lines) if line.startswith("┡"))
        # each header's words, read down its column (a header may wrap at its line break, never be cut)
        rows = [[cell.strip() for cell in line.split("┃")[1:-1]] for line in lines[top + 1 : bottom]]
        columns = zip(*rows, strict=True)
        assert [" ".join(word for word in column if word) for column in columns] == headers
    assert cells(gem, "after SFT") == ["after SFT", "0", "81% (52/64)", "+0.500", "25%", "13.0", "2"]
    assert cells(terminal, "step 100") == ["step 100", "100", "81% (52/64)", "+0.500", "13.0", "2", "17 / 1"]
    assert cells(terminal, "after RL")[2] == "100% (64/64)"


def test_a_summary_too_wide_for_the_console_is_shown_one_eval_per_block() -> None:
    rows = summary_rows(episodes=128)
    assert cells(render_summary(terminal=True, rows=rows, width=80), "after RL")[2] == "100% (128/128)"
    lines = render_summary(terminal=True, rows=rows, width=60)
    assert all(len(line) <= 60 for line in lines) and not any("…" in line for line in lines)
    blocks = [cells(lines, label) for label in ("eval", "success", "agent timeouts / errors")]
    assert blocks == [["eval", "base"], ["success", "81% (52/64)"], ["agent timeouts / errors", "17 / 1"]]
    assert ["success", "100% (128/128)"] in [[c.strip() for c in line.split("│")[1:-1]] for line in lines]
    assert sum(line.startswith("│ eval ") for line in lines) == 4
