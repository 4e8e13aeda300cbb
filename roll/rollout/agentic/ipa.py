"""IPA on terminal tasks with initialized resampling, end to end: evaluate, train in rounds, evaluate again.

    python -m roll.rollout.agentic.ipa configs/ipa_terminal.yaml [key.sub=value ...]
    roll agentic configs/ipa_terminal.yaml [key.sub=value ...]

Serves the model in-process (`TorchEngine` behind `roll serve`'s app), starts the ModelProxyService (train
mode) and a ROCK fleet, and builds each task's oracle expert trajectory. Then:

1. before: the success rate at every start point k = 0..K-1 (k expert chunks prefilled);
2. `rounds` training rounds: per task, episodes at the schedule's anchors (sequential rollback with parallel
   anchors), their trajectories (chunks recorded by the proxy; the imitation fallback when a task has no
   success), `train.steps_per_round` IPA steps on the torch train backend, the new weights into the engine;
3. after: the success rate by start point again (when `rounds` > 0).

Prints the tables and writes `report.json` under `output`.
"""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING, Any

from roll.config import load_config
from roll.rollout.agentic.config import IPATerminalConfig

if TYPE_CHECKING:
    from rock.proxy import ProxyClient
    from roll.rollout.agentic.episode import AgentEpisode
    from roll.rollout.agentic.expert import ExpertStep
    from roll.rollout.agentic.resampling import SequentialRollback
    from rome.bench.tasks import Task

__all__ = ["IPATerminalConfig", "main", "run"]


class EpisodeRunner:
    """Runs one episode of a task from a start point through a proxy (training or evaluation)."""

    def __init__(self, config: IPATerminalConfig, fleet_url: str) -> None:
        self.config, self.fleet_url = config, fleet_url

    def __call__(self, proxy: ProxyClient, task: Task, expert: list[ExpertStep], start: int) -> AgentEpisode:
        from roll.rollout.agentic.episode import run_agent_episode

        return run_agent_episode(
            task,
            proxy,
            self.fleet_url,
            agent_timeout_s=self.config.agent_timeout_s,
            expert=expert,
            start=start,
            max_turns=self.config.max_turns,
            in_sandbox=self.config.in_sandbox,
        )


def _log(console: Any, label: str, task: Task, start: int, expert_len: int, episode: AgentEpisode) -> None:
    chunks = len(episode.trajectory.chunks) if episode.trajectory else 0
    console.print(
        f"{label} {task.id} start {start}/{expert_len}: reward {episode.reward:g}, {chunks} chunks "
        f"{episode.trial.failure_mode or ''}"
    )


def evaluate(
    label: str,
    tasks: list[Task],
    experts: dict[str, list[ExpertStep]],
    runner: EpisodeRunner,
    proxy: ProxyClient,
    console: Any,
) -> dict[str, dict[str, float]]:
    """Success rate of every start point 0..K-1 of every task."""
    episodes = runner.config.eval.episodes_per_start
    out: dict[str, dict[str, float]] = {}
    for task in tasks:
        expert = experts[task.id]
        rates: dict[str, float] = {}
        for start in range(len(expert)):
            wins = 0
            for _ in range(episodes):
                episode = runner(proxy, task, expert, start)
                wins += episode.reward >= 1.0
                _log(console, label, task, start, len(expert), episode)
            rates[str(start)] = wins / episodes
        out[task.id] = rates
    return out


def resample_round(
    round_index: int,
    task: Task,
    expert: list[ExpertStep],
    schedule: SequentialRollback,
    runner: EpisodeRunner,
    proxy: ProxyClient,
    console: Any,
) -> tuple[list[AgentEpisode], dict[str, Any]]:
    """One round of a task: `episodes_per_anchor` episodes at each of the schedule's anchors (latest first),
    each recorded in the schedule; the episodes and the round's entry of the report."""
    config = runner.config
    entry: dict[str, Any] = {"round": round_index, "start": schedule.current, "anchors": {}}
    episodes = []
    for start in sorted(set(schedule.anchors(config.anchors)), reverse=True):
        for _ in range(config.episodes_per_anchor):
            episode = runner(proxy, task, expert, start)
            _log(console, f"round {round_index}", task, start, len(expert), episode)
            episodes.append(episode)
            success = episode.reward >= 1.0
            schedule.record(start, success)
            wins, total = entry["anchors"].get(str(start), (0, 0))
            entry["anchors"][str(start)] = (wins + int(success), total + 1)
    entry["next_start"] = schedule.current
    return episodes, entry


def run(config: IPATerminalConfig) -> dict[str, Any]:
    from rich.console import Console

    from rock.images import ensure_base_images
    from rock.proxy import ProxyClient, ProxyConfig
    from rock.proxy.server import ProxyThread
    from roll.models import load_model
    from roll.rollout.agentic.batches import round_trajectories
    from roll.rollout.agentic.expert import oracle_expert
    from roll.rollout.agentic.report import render_tables
    from roll.rollout.agentic.resampling import SequentialRollback, crucial_fork
    from roll.rollout.agentic.serving import EngineServer
    from roll.rollout.agentic.training import RoundTrainer
    from rome.bench.fleet import LocalFleet
    from rome.bench.tasks import Task, load_task

    began = time.monotonic()
    console = Console(stderr=True)
    tasks: list[Task] = []
    for task_id in config.task_ids:
        loaded_task = load_task(config.tasks_dir / task_id)
        if not isinstance(loaded_task, Task):
            raise SystemExit(f"task {task_id}: {loaded_task}")
        tasks.append(loaded_task)
    experts = {task.id: oracle_expert(task) for task in tasks}
    ensure_base_images()
    loaded = load_model(config.model)
    trainer = RoundTrainer(config) if config.rounds else None
    report: dict[str, Any] = {
        "model": config.model,
        "settings": config.model_dump(mode="json"),
        "tasks": {
            task.id: {"expert_chunks": len(experts[task.id]), "rounds": [], "before": None, "after": None}
            for task in tasks
        },
        "rounds": [],
    }

    def proxy_config(temperature: float) -> ProxyConfig:
        return ProxyConfig(
            mode="train", upstream_url=engine.url, max_tokens=config.max_tokens, temperature=temperature
        )

    with (
        EngineServer(loaded) as engine,
        LocalFleet(slots=4) as fleet,
        ProxyThread(proxy_config(config.temperature)) as train_thread,
        ProxyThread(proxy_config(config.eval.temperature)) as eval_thread,
        ProxyClient(train_thread.url) as train_proxy,
        ProxyClient(eval_thread.url) as eval_proxy,
    ):
        runner = EpisodeRunner(config, fleet.url)
        before = evaluate("before", tasks, experts, runner, eval_proxy, console)
        for task in tasks:
            report["tasks"][task.id]["before"] = before[task.id]
        schedules = {
            task.id: SequentialRollback(
                len(experts[task.id]), config.rollback.threshold, config.rollback.min_samples
            )
            for task in tasks
        }
        for round_index in range(config.rounds):
            assert trainer is not None
            batch = []
            for task in tasks:
                episodes, entry = resample_round(
                    round_index, task, experts[task.id], schedules[task.id], runner, train_proxy, console
                )
                trajectories = round_trajectories(
                    task.id, round_index, episodes, experts[task.id], loaded.tokenizer
                )
                entry["imitation"] = any(t.metadata.get("imitation") for t in trajectories)
                report["tasks"][task.id]["rounds"].append(entry)
                batch.extend(trajectories)
            summary = trainer.train(batch)
            engine.update_weights(*trainer.weights())
            summary["engine_version"] = engine.health()["weight_version"]
            summary["round"] = round_index
            nll = (
                f", expert NLL {summary['expert_nll_before']:.3f} -> {summary['expert_nll_after']:.3f}"
                if "expert_nll_before" in summary
                else ""
            )
            console.print(
                f"round {round_index}: {summary['trained_trajectories']} of {summary['trajectories']} "
                "trajectories trained "
                f"({summary['imitation_trajectories']} imitation), loss {summary['loss']:.4f}{nll}, "
                f"trainer version {summary['trainer_version']}, engine version {summary['engine_version']}"
            )
            report["rounds"].append(summary)
        if config.rounds:
            after = evaluate("after", tasks, experts, runner, eval_proxy, console)
            for task in tasks:
                report["tasks"][task.id]["after"] = after[task.id]
    for task in tasks:
        row = report["tasks"][task.id]
        for phase in ("before", "after"):
            if row[phase] is not None:
                rates = {int(k): v for k, v in row[phase].items()}
                row[f"crucial_fork_{phase}"] = crucial_fork(rates, config.crucial_fork_gap)
    report["wall_time_s"] = round(time.monotonic() - began, 1)
    for table in render_tables(report):
        console.print(table)
    config.output.mkdir(parents=True, exist_ok=True)
    (config.output / "report.json").write_text(json.dumps(report, indent=2))
    console.print(f"report: {config.output / 'report.json'}")
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
