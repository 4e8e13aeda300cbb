"""IPA on terminal tasks with initialized resampling, end to end: evaluate, train in rounds, evaluate again.

    python -m roll.rollout.agentic.ipa configs/ipa_terminal.yaml [key.sub=value ...]
    roll agentic configs/ipa_terminal.yaml [key.sub=value ...]

Serves the model in-process (`TorchEngine` behind `roll serve`'s app), starts the ModelProxyService (train
mode) and a ROCK fleet, and builds each task's oracle expert trajectory. A task whose refreshed expert was
saved by an earlier run under `output/experts/` (for the same task files) trains from that one instead; the
run says which expert each task starts from, and why a saved one was not used. Then:

1. before: the success rate at every start point k = 0..K-1 (k oracle chunks prefilled);
2. `rounds` training rounds: per task, episodes at the schedule's anchors (sequential rollback with parallel
   anchors) on the task's current expert, their trajectories (chunks recorded by the proxy; the imitation
   fallback when a task has no success), `train.steps_per_round` IPA steps on the torch train backend, the
   new weights into the engine. A success from an earlier start that is a better expert (shorter, or more
   of it the policy's own) replaces the task's expert (`expert_book`; saved under `output/experts/`);
3. after: the success rate by start point again (when `rounds` > 0), on the oracle prefixes as before;
   with `eval.every_round`, after every round (the table then has a column per round).

Episodes run `parallel_episodes` at a time (`rounds`). Prints the tables and writes `report.json` under
`output`.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from roll.config import load_config
from roll.rollout.agentic.config import IPATerminalConfig

__all__ = ["IPATerminalConfig", "main", "run"]


def run(config: IPATerminalConfig) -> dict[str, Any]:
    from rich.console import Console

    from rock.fleet import LocalFleet
    from rock.images import ensure_base_images
    from rock.proxy import ProxyConfig
    from rock.proxy.server import ProxyThread
    from roll.models import load_model
    from roll.rollout.agentic.batches import round_trajectories
    from roll.rollout.agentic.expert import oracle_expert
    from roll.rollout.agentic.expert_book import ExpertBook
    from roll.rollout.agentic.expert_store import task_fingerprint
    from roll.rollout.agentic.report import render_tables
    from roll.rollout.agentic.resampling import SequentialRollback, crucial_fork
    from roll.rollout.agentic.rounds import EpisodeRunner, evaluate, resample_round
    from roll.rollout.agentic.serving import EngineServer
    from roll.rollout.agentic.training import RoundTrainer
    from rome.terminal_tasks.task import Task, load_task

    began = time.monotonic()
    # Written to a log, rich would wrap at 80 columns and cut the per-round table's task names.
    console = Console(stderr=True, width=None if sys.stderr.isatty() else 120)
    tasks: list[Task] = []
    for task_id in config.task_ids:
        loaded_task = load_task(config.tasks_dir / task_id)
        if not isinstance(loaded_task, Task):
            raise SystemExit(f"task {task_id}: {loaded_task}")
        tasks.append(loaded_task)
    experts = {task.id: oracle_expert(task) for task in tasks}
    fingerprints = {task.id: task_fingerprint(task.path) for task in tasks}
    book = ExpertBook(experts, config.output / "experts", fingerprints)
    starts = book.load_saved()
    for start in starts.values():
        console.print(start.describe(), style=None if start.problem is None else "yellow", markup=False)
    ensure_base_images()
    loaded = load_model(config.model)
    trainer = RoundTrainer(config) if config.rounds else None
    report: dict[str, Any] = {
        "model": config.model,
        "settings": config.model_dump(mode="json"),
        "tasks": {
            task.id: {
                "expert_chunks": len(experts[task.id]),
                "expert_start": starts[task.id].to_json(),
                "rounds": [],
                "before": None,
                "after": None,
            }
            for task in tasks
        },
        "rounds": [],
    }

    def proxy_config(temperature: float) -> ProxyConfig:
        # A call may take as long as its episode on a loaded machine; one that timed out is not retried
        # (the engine would start the same generation over).
        return ProxyConfig(
            mode="train",
            upstream_url=engine.url,
            max_tokens=config.max_tokens,
            temperature=temperature,
            timeout_s=config.agent_timeout_s,
            max_retries=0,
        )

    with (
        EngineServer(loaded) as engine,
        LocalFleet(slots=config.parallel_episodes, stop_with_parent=True) as fleet,
        ProxyThread(proxy_config(config.temperature)) as train_proxy,
        ProxyThread(proxy_config(config.eval.temperature)) as eval_proxy,
    ):
        runner = EpisodeRunner(config, fleet.url)
        before = evaluate("before", tasks, experts, runner, eval_proxy.url, console)
        for task in tasks:
            report["tasks"][task.id]["before"] = before[task.id]
        schedules = {
            task.id: SequentialRollback(
                len(book.current(task.id).steps),
                config.rollback.threshold,
                config.rollback.min_samples,
                config.rollback.window,
            )
            for task in tasks
        }
        for round_index in range(config.rounds):
            assert trainer is not None
            batch = []
            for task_round in resample_round(
                round_index, tasks, book, schedules, runner, train_proxy.url, console
            ):
                task_id = task_round.task.id
                trajectories = round_trajectories(
                    task_id, round_index, task_round.episodes, task_round.base.steps, loaded.tokenizer
                )
                task_round.entry["imitation"] = any(t.metadata.get("imitation") for t in trajectories)
                report["tasks"][task_id]["rounds"].append(task_round.entry)
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
            if config.eval.every_round or round_index == config.rounds - 1:
                label = f"after round {round_index}"
                rates = evaluate(label, tasks, experts, runner, eval_proxy.url, console)
                for task in tasks:
                    report["tasks"][task.id]["after"] = rates[task.id]
                    if config.eval.every_round:
                        report["tasks"][task.id]["rounds"][-1]["eval"] = rates[task.id]
            save_report(report, config, began)  # a run stopped later still leaves its rounds so far
    for task in tasks:
        row = report["tasks"][task.id]
        row["expert"] = book.summary()[task.id]
        for phase in ("before", "after"):
            if row[phase] is not None:
                rates = {int(k): v for k, v in row[phase].items()}
                row[f"crucial_fork_{phase}"] = crucial_fork(rates, config.crucial_fork_gap)
    save_report(report, config, began)
    for table in render_tables(report):
        console.print(table)
    console.print(f"report: {config.output / 'report.json'}")
    return report


def save_report(report: dict[str, Any], config: IPATerminalConfig, began: float) -> None:
    report["wall_time_s"] = round(time.monotonic() - began, 1)
    config.output.mkdir(parents=True, exist_ok=True)
    (config.output / "report.json").write_text(json.dumps(report, indent=2))


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        return
    config = load_config(IPATerminalConfig, args[0], args[1:])
    print(json.dumps(run(config)))


if __name__ == "__main__":
    main()
