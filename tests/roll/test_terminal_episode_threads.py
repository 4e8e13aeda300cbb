"""The terminal env manager plays as many episodes at once as its fleet has sandbox slots.

An episode holds a thread from sandbox to verdict; when those threads came from the rollout worker's default
pool (sized for training's episodes_in_flight), an 80-episode evaluation with 16 slots ran about 9 at once.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import pytest

from roll.rollout.config import SamplingConfig
from roll.rollout.episode import EpisodeError, EpisodeTask
from roll.rollout.terminal import manager as manager_module
from roll.rollout.terminal.config import TerminalEnvConfig


class _Scheduler:
    def __init__(self, *_: Any) -> None:
        pass

    async def begin(self, task: EpisodeTask, task_id: str) -> SimpleNamespace:
        return SimpleNamespace(expert=[], start=0)


class _Endpoints:
    def __init__(self, *_: Any) -> None:
        pass

    def for_placement(self, *_: Any) -> str:
        return "http://127.0.0.1:1"

    def close(self) -> None:
        pass


@pytest.mark.parametrize("slots", [3, 12])
def test_every_sandbox_slot_gets_an_episode_at_once(monkeypatch: pytest.MonkeyPatch, slots: int) -> None:
    monkeypatch.setattr(
        manager_module, "load_terminal_tasks", lambda config, held_out=False: [SimpleNamespace(id="t")]
    )
    monkeypatch.setattr(manager_module, "oracle_experts", lambda tasks: {})
    monkeypatch.setattr(manager_module, "AgentEndpoints", _Endpoints)
    monkeypatch.setattr(manager_module, "LedgerProvider", lambda *_: None)
    monkeypatch.setattr(manager_module, "StartScheduler", _Scheduler)
    config = TerminalEnvConfig(task_ids=["t"], rock={"slots": slots})
    manager = manager_module.TerminalEnvManager(config, None, "m", [], "http://127.0.0.1:1", None, None, "w0")
    together = threading.Barrier(slots, timeout=30)

    def play(*_: Any) -> SimpleNamespace:
        together.wait()  # breaks (and the episode fails otherwise) unless `slots` episodes play at once
        return SimpleNamespace(record=None, failure_mode="sandbox_error", error="stopped by the test")

    manager._play = play  # type: ignore[method-assign]

    async def evaluate() -> list[BaseException | None]:
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(2))  # a worker's small pool
        tasks = [EpisodeTask(f"g{i}", seed=i, index=0) for i in range(slots)]
        results = await asyncio.gather(
            *(manager.run_episode(task, 0, SamplingConfig()) for task in tasks), return_exceptions=True
        )
        return [r if isinstance(r, BaseException) else None for r in results]

    try:
        errors = asyncio.run(evaluate())
    finally:
        manager.close()
    assert not together.broken
    assert all(isinstance(e, EpisodeError) and "stopped by the test" in str(e) for e in errors)
