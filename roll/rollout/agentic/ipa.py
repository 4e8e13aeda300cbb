"""Initialized resampling on terminal tasks, end to end: per task, the success rate of the policy by the
expert chunk it starts from.

    python -m roll.rollout.agentic.ipa configs/ipa_terminal.yaml [key.sub=value ...]

Starts `roll serve` for the model, the ModelProxyService (train mode) and a ROCK fleet; for each task builds
the oracle expert trajectory, then for `rounds` rounds runs `episodes_per_anchor` episodes at each of the
schedule's anchors (sequential rollback with parallel anchors), and reports success by start point, the
crucial fork, and the chunk counts of the trajectories collected. Writes `report.json` under `output`.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import Field

from roll.config import StrictConfig, load_config


class RollbackConfig(StrictConfig):
    threshold: float = Field(
        0.5, gt=0, le=1, description="Success rate at the current start that moves it back"
    )
    min_samples: int = Field(2, ge=1, description="Episodes at the current start before it may move back")


class IPATerminalConfig(StrictConfig):
    """Initialized resampling on terminal tasks (see the module docstring)."""

    model: str = Field("builtin:smollm2-135m-instruct", description="Builtin id or model folder")
    tasks_dir: Path = Field(Path("rome/tasks/terminal-pro"), description="Folder of task folders")
    task_ids: list[str] = Field(min_length=1, description="Tasks to run (folder names)")
    rounds: int = Field(1, ge=1, description="Rounds of the rollback schedule per task")
    anchors: int = Field(3, ge=1, description="Start points per round: the current one and those before it")
    episodes_per_anchor: int = Field(1, ge=1)
    rollback: RollbackConfig = Field(default_factory=RollbackConfig)
    crucial_fork_gap: float = Field(0.5, gt=0, le=1, description="Success jump that marks a crucial fork")
    max_turns: int = Field(3, ge=1, description="Model calls per episode")
    max_tokens: int = Field(96, ge=1, description="Output tokens per model call")
    temperature: float = Field(0.7, ge=0)
    agent_timeout_s: float = Field(300.0, gt=0)
    output: Path = Field(Path("runs/ipa_terminal"), description="Where report.json goes")


@contextmanager
def _engine_server(model_id: str) -> Iterator[str]:
    import uvicorn

    from roll.engine.server import create_app
    from roll.engine.torch_engine import TorchEngine
    from roll.models import load_model

    loaded = load_model(model_id)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(create_app(TorchEngine(loaded), loaded), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the engine server for {model_id} did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=60)
        sock.close()


def run(config: IPATerminalConfig) -> dict[str, Any]:
    from rich.console import Console
    from rich.table import Table

    from rock.images import ensure_base_images
    from rock.proxy import ProxyClient, ProxyConfig
    from rock.proxy.server import ProxyThread
    from roll.rollout.agentic.episode import run_agent_episode
    from roll.rollout.agentic.expert import oracle_expert
    from roll.rollout.agentic.resampling import SequentialRollback, crucial_fork
    from rome.bench.fleet import LocalFleet
    from rome.bench.tasks import Task, load_task

    console = Console(stderr=True)
    tasks: list[Task] = []
    for task_id in config.task_ids:
        loaded = load_task(config.tasks_dir / task_id)
        if not isinstance(loaded, Task):
            raise SystemExit(f"task {task_id}: {loaded}")
        tasks.append(loaded)
    ensure_base_images()
    report: dict[str, Any] = {"model": config.model, "tasks": {}}
    with _engine_server(config.model) as engine_url, LocalFleet(slots=4) as fleet:
        proxy_config = ProxyConfig(
            mode="train",
            upstream_url=engine_url,
            max_tokens=config.max_tokens,
            temperature=config.temperature,
        )
        with ProxyThread(proxy_config) as thread, ProxyClient(thread.url) as proxy:
            for task in tasks:
                expert = oracle_expert(task)
                schedule = SequentialRollback(
                    len(expert), config.rollback.threshold, config.rollback.min_samples
                )
                chunk_counts: dict[int, list[int]] = {}
                for round_index in range(config.rounds):
                    for start in sorted(set(schedule.anchors(config.anchors))):
                        for _ in range(config.episodes_per_anchor):
                            episode = run_agent_episode(
                                task,
                                proxy,
                                fleet.url,
                                agent_timeout_s=config.agent_timeout_s,
                                expert=expert,
                                start=start,
                                max_turns=config.max_turns,
                            )
                            success = episode.reward >= 1.0
                            schedule.record(start, success)
                            chunks = len(episode.trajectory.chunks) if episode.trajectory else 0
                            chunk_counts.setdefault(start, []).append(chunks)
                            console.print(
                                f"{task.id} round {round_index} start {start}/{len(expert)}: "
                                f"reward {episode.reward:g}, {chunks} chunks "
                                f"{episode.trial.failure_mode or ''}"
                            )
                rates = schedule.rates()
                report["tasks"][task.id] = {
                    "expert_chunks": len(expert),
                    "success_by_start": {str(k): v for k, v in rates.items()},
                    "episodes_by_start": {str(k): s.episodes for k, s in sorted(schedule.stats.items())},
                    "policy_chunks_by_start": {str(k): v for k, v in sorted(chunk_counts.items())},
                    "next_start": schedule.current,
                    "crucial_fork": crucial_fork(rates, config.crucial_fork_gap),
                }
    table = Table(title=f"success rate by start point ({config.model})")
    table.add_column("task")
    table.add_column("expert chunks", justify="right")
    table.add_column("success by start k (k expert chunks prefilled)")
    table.add_column("crucial fork", justify="right")
    for task_id, row in report["tasks"].items():
        rates = ", ".join(f"k={k}: {v:.2f}" for k, v in row["success_by_start"].items())
        table.add_row(task_id, str(row["expert_chunks"]), rates, str(row["crucial_fork"]))
    console.print(table)
    config.output.mkdir(parents=True, exist_ok=True)
    (config.output / "report.json").write_text(json.dumps(report, indent=2))
    return report


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        return
    config = load_config(IPATerminalConfig, args[0], args[1:])
    print(json.dumps(run(config)))


if __name__ == "__main__":
    main()
