"""Agent-native episodes end to end (the terminal env manager's episode): a real terminal task in a ROCK
sandbox, the iflow agent on the host (or inside the sandbox) with its model at the ModelProxyService (train
mode), whose engine is `roll serve` over a scripted engine (a test double for the model's choices, with the
real tokenizer, chat template and tool-call parsing)."""

from __future__ import annotations

import json
import platform
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from iflow.agent.prompts import COMPACT_PROMPT
from iflow.types import TRAINING_ENVIRONMENT, FixedEnvironment, PromptProfile
from rock.proxy import ProxyClient, ProxyConfig
from rock.proxy.server import ProxyThread
from roll.rollout.terminal.config import TerminalAgentConfig
from roll.rollout.terminal.episode import AgentEpisode, _run_agent, play_episode
from roll.rollout.terminal.resampling.expert import ExpertStep, oracle_expert
from roll.rollout.terminal.resampling.imitation import expert_from_record
from roll.rollout.terminal.resampling.prefill import CONTINUE_PROMPT
from roll.testing import ScriptedEngine
from roll.types import Trajectory
from rome.terminal_tasks.rock_sandbox import RockProvider
from rome.terminal_tasks.task import Task, load_task

pytestmark = [pytest.mark.docker, pytest.mark.slow]
SUITE = Path(__file__).resolve().parents[2] / "rome" / "tasks" / "terminal-pro"


def shell_call(command: str) -> str:
    """A scripted reply calling iflow's shell tool, in the `<tool_call>` form the chat template parses."""
    return (
        "<tool_call>"
        + json.dumps({"name": "run_shell_command", "arguments": {"command": command}})
        + "</tool_call>"
    )


@pytest.fixture(scope="module")
def scripted(tiny_moe: Any) -> Iterator[tuple[ScriptedEngine, str]]:
    """The scripted engine behind the real server app, on a free loopback port."""

    from roll.engine.server import create_app
    from roll.engine.server.loopback import LoopbackServer

    engine = ScriptedEngine(tiny_moe.tokenizer)
    server = LoopbackServer(create_app(engine, tiny_moe), "scripted-engine")
    try:
        yield engine, f"{server.url}/v1"
    finally:
        server.close()


@pytest.fixture(scope="module")
def fleet_url() -> Iterator[str]:
    from rock.fleet import LocalFleet
    from rock.images import ensure_base_images

    ensure_base_images()
    # The fleet builds the task's image from the suite's folder: one of its build roots.
    with LocalFleet(slots=4, admin_args=["--build-context-root", str(SUITE)]) as fleet:
        yield fleet.url


@pytest.fixture(scope="module")
def proxy(scripted: tuple[ScriptedEngine, str]) -> Iterator[ProxyClient]:
    with (
        ProxyThread(ProxyConfig(mode="train", upstream_url=scripted[1])) as thread,
        ProxyClient(thread.url) as client,
    ):
        yield client


@pytest.fixture(scope="module")
def task() -> Task:
    loaded = load_task(SUITE / "trapezoid-integral")
    assert isinstance(loaded, Task)
    return loaded


@dataclass
class Episode:
    """A played episode and the trajectory its record makes (the policy's chunks, the test reward)."""

    played: AgentEpisode
    start: int

    @property
    def trial(self) -> AgentEpisode:
        return self.played

    @property
    def record(self) -> Any:
        return self.played.record

    @property
    def reward(self) -> float:
        return self.played.reward

    @property
    def trajectory(self) -> Trajectory | None:
        chunks = [recorded.chunk for recorded in self.played.record.chunks]
        if not chunks:
            return None
        task_id = self.played.task_id
        return Trajectory(chunks=chunks, reward=self.reward, task_id=task_id, metadata={"start": self.start})


def run_agent_episode(
    task: Task,
    proxy: ProxyClient,
    fleet_url: str,
    agent_timeout_s: float,
    expert: list[ExpertStep] | None = None,
    start: int = 0,
    in_sandbox: bool = False,
    prompt_profile: PromptProfile = "full",
    environment: FixedEnvironment = TRAINING_ENVIRONMENT,
) -> Episode:
    agent = TerminalAgentConfig(
        placement="sandbox" if in_sandbox else "host",
        max_turns=20,
        timeout_s=agent_timeout_s,
        prompt_profile=prompt_profile,
        environment_date=environment.date,
        environment_os=environment.os,
    )
    played = play_episode(task, proxy, RockProvider(fleet_url), agent, expert or [], start)
    return Episode(played, start)


def run_scripted(
    replies: list[str], engine: ScriptedEngine, proxy: ProxyClient, fleet_url: str, task: Task
) -> tuple[Any, list[list[int]]]:
    first = len(engine.prompts)
    engine.push(*replies)
    episode = run_agent_episode(task, proxy, fleet_url, agent_timeout_s=120)
    return episode, engine.prompts[first:]


def test_an_oracle_following_model_earns_reward_one(
    scripted: tuple[ScriptedEngine, str], proxy: ProxyClient, fleet_url: str, task: Task, tiny_moe: Any
):
    engine = scripted[0]
    solution = (task.path / "solution" / "solve.sh").read_text()
    replies = [shell_call(solution), "The integral is in /app/integral.txt."]
    episode, prompts = run_scripted(replies, engine, proxy, fleet_url, task)

    assert episode.trial.failure_mode is None, episode.trial.error
    assert episode.reward == 1.0
    trajectory = episode.trajectory
    assert trajectory is not None and len(trajectory.chunks) == 2
    assert trajectory.reward == 1.0 and trajectory.task_id == task.id
    end_of_turn = engine.end_of_turn
    for chunk, reply, prompt in zip(trajectory.chunks, replies, prompts, strict=True):
        assert chunk.output_ids == tiny_moe.tokenizer.encode(reply, add_special_tokens=False) + end_of_turn
        assert chunk.context_ids == prompt  # exactly what the engine was conditioned on
    # The tool's result reached the model: the second context holds the shell's exit code.
    assert "Exit code: 0" in tiny_moe.tokenizer.decode(trajectory.chunks[1].context_ids)
    # A successful episode serves as an expert trajectory: its steps are the calls the model made.
    assert expert_from_record(episode.record) == [ExpertStep(command=solution), ExpertStep(None, replies[1])]


def test_a_wrong_model_earns_reward_zero(
    scripted: tuple[ScriptedEngine, str], proxy: ProxyClient, fleet_url: str, task: Task
):
    replies = [shell_call("echo 1.0 > /app/integral.txt"), "Done."]
    episode, _ = run_scripted(replies, scripted[0], proxy, fleet_url, task)

    assert episode.reward == 0.0 and episode.trial.failure_mode is None
    assert episode.trajectory is not None and len(episode.trajectory.chunks) == 2
    assert episode.trajectory.reward == 0.0


def test_a_prefilled_episode_continues_after_the_expert_steps(
    scripted: tuple[ScriptedEngine, str], proxy: ProxyClient, fleet_url: str, task: Task, tiny_moe: Any
):
    expert = oracle_expert(task)
    assert len(expert) == 2  # the solution's one statement, then the final message
    engine = scripted[0]
    first = len(engine.prompts)
    engine.push("Finished.")
    episode = run_agent_episode(task, proxy, fleet_url, agent_timeout_s=120, expert=expert, start=1)

    assert episode.reward == 1.0, episode.trial.error  # the replayed solution did the work
    trajectory = episode.trajectory
    assert trajectory is not None and len(trajectory.chunks) == 1 and trajectory.metadata["start"] == 1
    context = tiny_moe.tokenizer.decode(trajectory.chunks[0].context_ids)
    assert "Exit code: 0" in context and CONTINUE_PROMPT in context and "integral.txt" in context
    assert engine.prompts[first:] == [trajectory.chunks[0].context_ids]


def test_the_agent_inside_the_sandbox_gives_the_same_chunks(
    scripted: tuple[ScriptedEngine, str], proxy: ProxyClient, fleet_url: str, task: Task
):
    solution = (task.path / "solution" / "solve.sh").read_text()
    replies = [shell_call(solution), "The integral is in /app/integral.txt."]
    on_host, _ = run_scripted(replies, scripted[0], proxy, fleet_url, task)
    engine = scripted[0]
    engine.push(*replies)
    inside = run_agent_episode(task, proxy, fleet_url, agent_timeout_s=120, in_sandbox=True)

    assert inside.reward == 1.0, (inside.trial.error, inside.trial.agent_log[-2000:])
    assert on_host.trajectory is not None and inside.trajectory is not None
    assert [c.output_ids for c in inside.trajectory.chunks] == [
        c.output_ids for c in on_host.trajectory.chunks
    ]
    assert [c.context_ids for c in inside.trajectory.chunks] == [
        c.context_ids for c in on_host.trajectory.chunks
    ]


def test_a_prefilled_episode_gives_the_same_chunks_on_the_host_and_inside_the_sandbox(
    scripted: tuple[ScriptedEngine, str], proxy: ProxyClient, fleet_url: str, task: Task, tiny_moe: Any
):
    expert = oracle_expert(task)
    engine = scripted[0]
    # The policy reads the file the replayed expert step wrote, then stops: its second context holds the
    # file's content only if the expert's command really ran in this sandbox.
    replies = [shell_call("cat /app/integral.txt"), "Finished."]
    engine.push(*replies)
    on_host = run_agent_episode(task, proxy, fleet_url, agent_timeout_s=120, expert=expert, start=1)
    engine.push(*replies)
    inside = run_agent_episode(
        task, proxy, fleet_url, agent_timeout_s=120, expert=expert, start=1, in_sandbox=True
    )

    assert inside.reward == 1.0, (inside.trial.error, inside.trial.agent_log[-2000:])
    assert on_host.reward == 1.0, on_host.trial.error
    assert on_host.trajectory is not None and inside.trajectory is not None
    assert len(inside.trajectory.chunks) == 2 and inside.trajectory.metadata["start"] == 1
    assert [c.context_ids for c in inside.trajectory.chunks] == [
        c.context_ids for c in on_host.trajectory.chunks
    ]
    assert [c.output_ids for c in inside.trajectory.chunks] == [
        c.output_ids for c in on_host.trajectory.chunks
    ]
    first = tiny_moe.tokenizer.decode(inside.trajectory.chunks[0].context_ids)
    assert CONTINUE_PROMPT in first and "python3 - <<'PY'" in first and "Exit code: 0" in first
    second = tiny_moe.tokenizer.decode(inside.trajectory.chunks[1].context_ids)
    # The expert's script wrote the integral with 12 decimals; the policy's `cat` read it back.
    assert re.search(r"\d+\.\d{12}\s", second.split("cat /app/integral.txt")[-1])


def test_the_compact_prompt_profile_reaches_the_model_on_the_host_and_inside_the_sandbox(
    scripted: tuple[ScriptedEngine, str], proxy: ProxyClient, fleet_url: str, task: Task
):
    """Whatever runs the agent (the rollout worker, `iflow -p` in the sandbox, or the prefill script there),
    env.agent.prompt_profile decides what the policy is shown, so the chunks are the same."""
    expert = oracle_expert(task)
    engine = scripted[0]
    replies = [shell_call("cat /app/integral.txt"), "Finished."]
    episodes = []
    for in_sandbox, start in ((False, 1), (True, 1), (True, 0)):
        engine.push(*replies)
        episodes.append(
            run_agent_episode(
                task, proxy, fleet_url, 120, expert, start, in_sandbox, prompt_profile="compact"
            )
        )
    for episode in episodes:
        first = episode.record.chunks[0]
        assert first.messages[0]["content"] == COMPACT_PROMPT, episode.trial.agent_log[-2000:]
        assert [tool["function"]["name"] for tool in first.tools or []] == [
            "run_shell_command",
            "read_file",
            "write_file",
            "replace",
        ]
    on_host, inside = episodes[0].trajectory, episodes[1].trajectory
    assert on_host is not None and inside is not None
    assert [c.context_ids for c in inside.chunks] == [c.context_ids for c in on_host.chunks]


def test_the_environment_reminder_states_the_runs_date_and_os_on_the_host_and_inside_the_sandbox(
    scripted: tuple[ScriptedEngine, str], proxy: ProxyClient, fleet_url: str, task: Task, tiny_moe: Any
):
    """A task's prompt must not change with the day or the machine: the agent states env.agent's fixed date
    and OS wherever it runs, not today's date or the host's kernel (which the sandbox's uname reports)."""
    engine = scripted[0]
    fixed = FixedEnvironment(date="1999-12-31", os="TestOS 1")
    firsts = []
    for in_sandbox in (False, True):
        engine.push("Nothing to do.")
        episode = run_agent_episode(task, proxy, fleet_url, 120, in_sandbox=in_sandbox, environment=fixed)
        assert episode.trajectory is not None, episode.trial.agent_log[-2000:]
        firsts.append(tiny_moe.tokenizer.decode(episode.trajectory.chunks[0].context_ids))
    assert firsts[0] == firsts[1]
    assert "Date: 1999-12-31\nOS: TestOS 1\n" in firsts[0]
    assert platform.release() not in firsts[0]


def test_an_agent_inside_the_sandbox_needs_the_proxy_over_http() -> None:
    """A proxy the sandbox cannot reach is the harness's error, raised: not an agent outcome that scores 0."""
    agent = TerminalAgentConfig(placement="sandbox")
    with pytest.raises(ValueError, match="pass a ProxyClient"):
        _run_agent(None, None, object(), "episode", agent, [], 0)  # type: ignore[arg-type]
