"""Training rounds of agent-native episodes run concurrently, and the policy's own successes refresh the
task's expert: a real terminal task in ROCK sandboxes, iflow on the host, the proxy in train mode, and
`roll serve` over a scripted engine (a test double for the model's choices: a policy from the prompt to
the reply)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from rock.proxy import ProxyConfig
from rock.proxy.server import ProxyThread
from roll.rollout.agentic.agent import CONTINUE_PROMPT
from roll.rollout.agentic.config import IPATerminalConfig
from roll.rollout.agentic.expert import ExpertStep, oracle_expert
from roll.rollout.agentic.expert_book import ORACLE, ExpertBook
from roll.rollout.agentic.resampling import SequentialRollback
from roll.rollout.agentic.rounds import EpisodeJob, EpisodeRunner, evaluate, resample_round
from roll.rollout.agentic.serving import EngineServer
from roll.testing import ScriptedEngine
from rome.terminal_tasks.task import Task, load_task

pytestmark = [pytest.mark.docker, pytest.mark.slow]
SUITE = Path(__file__).resolve().parents[2] / "rome" / "tasks" / "terminal-pro"
# A correct solution other than the oracle's (the predicates swapped), so its chunks are recognisable.
OWN = (
    "find /srv/data -size +102400c -type f -printf '%s %p\\n' | LC_ALL=C sort -k1,1nr -k2,2 "
    "> /root/large_files.txt"
)
OWN_MARK = "-size +102400c -type f"
DONE = "All done."


def shell_call(command: str) -> str:
    return (
        "<tool_call>"
        + json.dumps({"name": "run_shell_command", "arguments": {"command": command}})
        + "</tool_call>"
    )


def own_way(prompt: str) -> str:
    """The scripted policy: after a prefix or its own command it is done, else it runs its own solution."""
    return DONE if CONTINUE_PROMPT in prompt or OWN_MARK in prompt else shell_call(OWN)


@pytest.fixture(scope="module")
def engine(tiny_moe: Any) -> Iterator[tuple[ScriptedEngine, str]]:
    """The scripted engine behind the real `roll serve` app, on a free loopback port."""

    scripted = ScriptedEngine(tiny_moe.tokenizer, policy=own_way)
    with EngineServer(tiny_moe, engine=scripted) as server:
        yield scripted, server.url


@pytest.fixture(scope="module")
def fleet_url() -> Iterator[str]:
    from rock.fleet import LocalFleet
    from rock.images import ensure_base_images

    ensure_base_images()
    with LocalFleet(slots=2) as fleet:
        yield fleet.url


@pytest.fixture(scope="module")
def task() -> Task:
    loaded = load_task(SUITE / "find-large-files")
    assert isinstance(loaded, Task)
    return loaded


def test_round_episodes_run_together_and_successes_refresh_the_expert(
    engine: tuple[ScriptedEngine, str], fleet_url: str, task: Task, tmp_path: Path, tiny_moe: Any
):
    scripted, url = engine
    config = IPATerminalConfig.model_validate(
        {
            "task_ids": [task.id],
            "anchors": 2,
            "parallel_episodes": 2,
            "rollback": {"threshold": 0.5, "min_samples": 2},
            "max_turns": 2,
            "agent_timeout_s": 120,
        }
    )
    oracle = oracle_expert(task)
    assert len(oracle) == 2  # the find command, then the final message
    book = ExpertBook({task.id: oracle}, tmp_path / "experts")
    schedules = {task.id: SequentialRollback(2, threshold=0.5, min_samples=2)}
    runner = EpisodeRunner(config, fleet_url)
    console = io.StringIO()
    log = Console(file=console, width=200)
    with ProxyThread(ProxyConfig(mode="train", upstream_url=url)) as proxy:
        # Round 0, anchors 1 and 0: their first calls reach the engine together (the engine holds them until
        # both are there; one at a time, the first would wait alone).
        scripted.gather_next(2)
        (round0,) = resample_round(0, [task], book, schedules, runner, proxy.url, log)
        assert scripted.max_in_flight == 2
        assert [e.reward for e in round0.episodes] == [1.0, 1.0], [e.trial.error for e in round0.episodes]
        assert [e.trajectory.metadata["start"] for e in round0.episodes if e.trajectory] == [1, 0]
        assert round0.base.steps == oracle
        assert round0.entry["anchors"] == {"1": (1, 1), "0": (1, 1)}
        from_scratch = round0.episodes[1].record.episode_id
        # Start 1 gave [oracle command, its own final word]; then start 0 gave two steps all its own.
        assert round0.entry["refreshed"] == {
            "round": 0,
            "episode_id": from_scratch,
            "start": 0,
            "steps": 2,
            "previous_steps": 2,
            "policy_steps": 2,
        }
        expert = book.current(task.id)
        assert expert.steps == [ExpertStep(OWN), ExpertStep(None, DONE)]
        assert expert.origins == [from_scratch, from_scratch] and ORACLE not in expert.origins
        assert [r["start"] for r in expert.refreshes] == [1, 0]
        saved = json.loads((tmp_path / "experts" / f"{task.id}.json").read_text())
        assert saved["steps"] == [{"command": OWN, "content": ""}, {"command": None, "content": DONE}]
        # min_samples 2: start 1 is not learned yet, and its count (made on the oracle's prefix) was dropped.
        assert schedules[task.id].current == 1 and schedules[task.id].rates() == {0: 1.0}
        assert round0.entry["next_start"] == 1 and round0.entry["expert_steps"] == 2

        # Round 1: the prefix at start 1 is the policy's own command, replayed in the sandbox.
        first = len(scripted.prompts)
        (round1,) = resample_round(1, [task], book, schedules, runner, proxy.url, log)
        assert [e.reward for e in round1.episodes] == [1.0, 1.0], [e.trial.error for e in round1.episodes]
        prefilled = round1.episodes[0].trajectory
        assert prefilled is not None and prefilled.metadata["start"] == 1
        context = tiny_moe.tokenizer.decode(prefilled.chunks[0].context_ids)
        assert CONTINUE_PROMPT in context and OWN_MARK in context and "-type f -size +102400c" not in context
        assert prefilled.chunks[0].context_ids in scripted.prompts[first:]
        assert "refreshed" not in round1.entry  # the same again is no better
        assert book.current(task.id).refreshes == expert.refreshes

        # Evaluation runs the oracle's prefixes, concurrently too.
        scripted.gather_next(2)
        scripted.max_in_flight = 0
        rates = evaluate("eval", [task], {task.id: oracle}, runner, proxy.url, log)
        assert rates == {task.id: {"0": 1.0, "1": 1.0}}
        assert scripted.max_in_flight == 2
    printed = console.getvalue()
    assert "is the new expert" in printed
    # Each episode's line shows what the policy did last (shortened): its command, or its final words.
    assert f"start 0/2: reward 1, 2 chunks; last: said {DONE}" in printed


def test_jobs_keep_their_order_whatever_finishes_first(fleet_url: str, task: Task, engine: Any):
    config = IPATerminalConfig.model_validate({"task_ids": [task.id], "parallel_episodes": 2, "max_turns": 1})
    oracle = oracle_expert(task)
    runner = EpisodeRunner(config, fleet_url)
    console = io.StringIO()
    with ProxyThread(ProxyConfig(mode="train", upstream_url=engine[1])) as proxy:
        jobs = [EpisodeJob(task, oracle, 1), EpisodeJob(task, oracle, 0), EpisodeJob(task, oracle, 1)]
        episodes = runner.run_all(proxy.url, jobs, "order", Console(file=console, width=200))
    starts = [e.trajectory.metadata["start"] if e.trajectory else None for e in episodes]
    assert starts == [1, 0, 1]
    assert len({e.record.episode_id for e in episodes}) == 3
    # From scratch the one call was the policy's command (its line shortened to 70 characters).
    line = f"order find-large-files start 0/2: reward 1, 1 chunks; last: ran {OWN[:63]}...\n"
    assert line in console.getvalue()
