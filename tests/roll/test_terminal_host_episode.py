"""A host-placement terminal episode with its proxy and engine in this process (roll.rollout.terminal.serving:
what a rollout worker does for env.agent.placement host): the real task, sandbox, iflow agent and tests, and
the scripted test double of the model's choices. Nothing starts listening in this process, and the chunks
are the ones the same episode gives through the proxy and engine servers over HTTP."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from rock.proxy.train import InProcessProxy
from roll.rollout.terminal.serving import EngineChat, HostProxy
from tests.roll import test_terminal_episode as episodes

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# The episode module's fixtures, under the names its fixtures ask each other for.
scripted, proxy, fleet_url, task = episodes.scripted, episodes.proxy, episodes.fleet_url, episodes.task


@pytest.fixture(scope="module")
def host_proxy(scripted: tuple[Any, str], tiny_moe: Any) -> Iterator[HostProxy]:
    """The in-process proxy over the same scripted engine, its calls on an event loop in a thread (the
    rollout worker's loop, in a run)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield HostProxy(InProcessProxy(EngineChat(scripted[0], tiny_moe)), loop)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


def test_a_host_episode_records_in_process_what_it_records_over_http(
    scripted: tuple[Any, str],
    proxy: Any,
    host_proxy: HostProxy,
    fleet_url: str,
    task: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine = scripted[0]
    solution = (task.path / "solution" / "solve.sh").read_text()
    replies = [episodes.shell_call(solution), "The integral is in /app/integral.txt."]
    over_http, _ = episodes.run_scripted(replies, engine, proxy, fleet_url, task)

    listened: list[Any] = []
    listen = socket.socket.listen

    def recorded(self: socket.socket, *args: Any) -> None:
        listened.append(self.getsockname())
        listen(self, *args)

    monkeypatch.setattr(socket.socket, "listen", recorded)
    engine.push(*replies)
    in_process = episodes.run_agent_episode(task, host_proxy, fleet_url, agent_timeout_s=120)  # type: ignore[arg-type]

    assert in_process.reward == 1.0, in_process.trial.error
    assert listened == []  # no server of any kind between the agent, its proxy and the engine
    assert over_http.trajectory is not None and in_process.trajectory is not None
    assert [c.context_ids for c in in_process.trajectory.chunks] == [
        c.context_ids for c in over_http.trajectory.chunks
    ]
    assert [c.output_ids for c in in_process.trajectory.chunks] == [
        c.output_ids for c in over_http.trajectory.chunks
    ]
    assert in_process.record.refused_calls == 0 and in_process.record.ended
