"""The controller of `roll train`: the RL loop, run in the driver over the Ray roles.

for step in steps:
    batch   = buffer.get_batch(step)       # rollout runs ahead on its own, up to async_ratio versions
    shrink engines (multiplexing)          # sleeping engines hand their devices to the trainer
    trainer.train_step(batch)
    expand engines; sync weights           # every engine serves version step + 1
    buffer.set_step(step + 1)              # lets rollout move one step further ahead
    log, checkpoint, evaluate
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from roll.pipeline.cluster import Cluster, init_ray
from roll.pipeline.config import TrainConfig
from roll.pipeline.display import eval_line, print_summary, step_line
from roll.pipeline.episodes import save_eval_episodes, save_train_sample
from roll.pipeline.rewards import train_rewards
from roll.pipeline.tracking import RunLog, episode_metrics
from roll.progress import StepProgress, print_plain
from roll.rollout.episode import EpisodeTask
from roll.rollout.gem_env import check_env
from roll.rollout.terminal.config import TerminalEnvConfig
from roll.rollout.terminal.evaluation import eval_fields, eval_tasks, held_out_sets, held_out_tasks
from roll.rollout.terminal.scripted_config import ScriptedEngineConfig

if TYPE_CHECKING:
    from roll.sft.config import SFTConfig


def train(config: TrainConfig, console: Console | None = None) -> list[dict[str, Any]]:
    """Run (or resume) training; returns the evaluation records (the summary table's rows)."""
    console = console or Console(stderr=True)
    started = time.perf_counter()
    config = with_prepared_data(config, console)
    run_dir = config.run_dir
    previous = RunLog.resume_point(run_dir) if config.resume else None
    if config.resume and previous is None:
        console.print(f"resume=true: {run_dir} has no checkpoint and no logs yet; the run starts at step 0")
    log = RunLog(run_dir, resume_step=previous[1]["step"] if previous else None)
    (run_dir / "config.json").write_text(config.model_dump_json(indent=2))
    check_env_config(config)
    policy = warm_start(config, console) if config.warm_start else config.trainer.model
    init_ray(config)
    start = previous[1]["step"] if previous else 0
    cluster = Cluster(
        config,
        policy,
        step=start,
        next_group=previous[1]["next_group"] if previous else 0,
        start_points=previous[1].get("start_points", {}) if previous else None,
    )
    try:
        if cluster.terminal is not None:
            for line in cluster.terminal.describe():
                console.print(line, markup=False)
        if previous:
            cluster.load(previous[0])
            console.print(f"Resumed from {previous[0]} at step {start}")
        elif config.warm_start and config.warm_start.eval_base:
            evaluate(cluster, config, log, console, step=0, label="base", model=config.trainer.model)
        cluster.sync_weights()
        if not previous:
            label = "after SFT" if config.warm_start else "before RL"
            evaluate(cluster, config, log, console, step=0, label=label, model=policy)
        cluster.set_step(start)  # rollout starts now, on the policy's weights
        with StepProgress(console, config.steps, start, "step") as progress:
            for step in range(start, config.steps):
                record = train_step(cluster, config, step)
                log.log_step(record)
                progress.update(record["step"], step_line(record))
                done = step + 1
                if done == config.steps or (config.save_every and done % config.save_every == 0):
                    cluster.save(log, done)
                if done < config.steps and config.eval.every and done % config.eval.every == 0:
                    evaluate(cluster, config, log, console, step=done, label=f"step {done}")
        if not previous or start < config.steps:
            evaluate(cluster, config, log, console, step=config.steps, label="after RL")
            cluster.export_model(run_dir / "model")
    finally:
        cluster.shutdown()
        log.close()
    print_summary(console, log.evals(), config, time.perf_counter() - started)
    return log.evals()


def train_step(cluster: Cluster, config: TrainConfig, step: int) -> dict[str, Any]:
    """One step: take a batch, train on it (engines shrunk while multiplexing), sync weights."""
    started = time.perf_counter()
    batch = cluster.next_batch(step)
    got_batch = time.perf_counter()
    slept = cluster.shrink_engines() if should_shrink(cluster, config) else []
    # Before the step: the kept episodes are scored under the weights they train from (pi_old).
    save_train_sample(config.run_dir, step + 1, batch, config.episodes, config.loss, cluster.trainer.logprobs)
    train_metrics = cluster.train_step(train_rewards(batch, config.reward))
    cluster.expand_engines()
    trained = time.perf_counter()
    version = cluster.sync_weights()
    cluster.set_step(step + 1)
    synced = time.perf_counter()
    wall = synced - started
    return {
        "step": step + 1,
        "version": version,
        **episode_metrics(batch, step),
        "samples_per_s": len(batch) / wall,
        "time_rollout_s": got_batch - started,
        "time_train_s": trained - got_batch,
        "time_sync_s": synced - trained,
        "time_step_s": wall,
        "engines_slept": len(slept),
        **{f"buffer/{k}": v for k, v in cluster.buffer_stats().items()},
        "workers_lost": cluster.workers_lost,
        **(cluster.terminal.metrics() if cluster.terminal is not None else {}),
        **{f"train/{k}": v for k, v in train_metrics.items()},
    }


def with_prepared_data(config: TrainConfig, console: Console) -> TrainConfig:
    """A terminal run with env.data first makes (or finds cached) its tasks and SFT data; the returned config
    names them: tasks_dir, task_ids, the held-out sets, experts, and the SFT data of warm_start."""
    if not isinstance(config.env, TerminalEnvConfig) or config.env.data is None:
        return config
    from roll.rollout.terminal.data_stage import prepare_terminal_data

    prepared = prepare_terminal_data(config.env, lambda line: print_plain(console, line))
    for line in prepared.summary:
        print_plain(console, line)
    env = config.env.model_copy(
        update={
            "data": None,
            "tasks_dir": prepared.tasks_dir,
            "task_ids": prepared.train_ids,
            "eval_task_ids": prepared.eval_ids,
            "out_of_family_task_ids": prepared.out_of_family_ids,
            "experts": prepared.experts,
        }
    )
    update: dict[str, Any] = {"env": env}
    if isinstance(config.engines.engine, ScriptedEngineConfig):  # it replays the oracles of the run's tasks
        engine = config.engines.engine.model_copy(update={"tasks_dir": prepared.tasks_dir})
        update["engines"] = config.engines.model_copy(update={"engine": engine})
    if config.warm_start is not None:
        overrides = [*config.warm_start.overrides, f"data.path={prepared.sft_path}"]
        update["warm_start"] = config.warm_start.model_copy(update={"overrides": overrides})
    return config.model_copy(update=update)


def check_env_config(config: TrainConfig) -> None:
    """Stop before any actor starts when the env cannot run here: a GEM env that does not make and reset, or
    terminal tasks that do not load or whose images do not build (built here once for every worker)."""
    if isinstance(config.env, TerminalEnvConfig):
        from roll.rollout.terminal.tasks import prepare_terminal_env

        prepare_terminal_env(config.env)
    else:
        check_env(config.env, config.train_seed_offset)


def should_shrink(cluster: Cluster, config: TrainConfig) -> bool:
    """Multiplexing policy: shrink the engine group while the buffer already holds the next batch (or, when
    synchronous, while no rollout can happen anyway)."""
    if not config.multiplex.enabled:
        return False
    return config.async_ratio == 0 or cluster.ready_groups() >= config.rollout.groups_per_step


def evaluate(
    cluster: Cluster,
    config: TrainConfig,
    log: RunLog,
    console: Console,
    step: int,
    label: str,
    model: str | None = None,
) -> None:
    """Fixed seeds, sampled as eval.sampling says; the same seeds (and sampling seeds) at every evaluation,
    so two evaluations compare pairwise (the summary's sign test). `model` names the weights the engines
    hold when they are not the run's own. Logged to eval.jsonl and shown as one line."""
    env = config.env
    if isinstance(env, TerminalEnvConfig) and env.held_out_task_ids:
        tasks = held_out_tasks(env.held_out_task_ids, config.eval.episodes)
    elif cluster.terminal is not None:
        tasks = eval_tasks(cluster.terminal.oracle_lengths, config.eval.episodes)
    else:
        seeds = range(config.eval.seed_offset, config.eval.seed_offset + config.eval.episodes)
        tasks = [EpisodeTask(f"eval{seed}", seed) for seed in seeds]
    if not tasks:
        return
    started = time.perf_counter()
    results = cluster.evaluate(tasks, config.eval.sampling)
    played = [t for t in results if t is not None]
    failed = len(results) - len(played)
    apart: dict[str, Any] = {}
    if isinstance(env, TerminalEnvConfig):
        # In-family held-out results are the record's own fields; the out-of-family set is kept apart.
        sets = held_out_sets(tasks, results, set(env.out_of_family_task_ids))
        played, failed = sets["in_family"]
        outcomes = eval_fields(played, config.eval.episodes, env.resampling.crucial_fork_gap)
        if "out_of_family" in sets:
            other, other_failed = sets["out_of_family"]
            fields = eval_fields(other, config.eval.episodes, env.resampling.crucial_fork_gap)
            apart = {
                "out_of_family": {
                    **episode_metrics(other),
                    "failed": other_failed,
                    "won_seeds": fields["won_seeds"],
                    "seed_rewards": fields["seed_rewards"],
                }
            }
    else:
        outcomes = {
            "won_seeds": sorted(t.metadata["seed"] for t in played if t.metadata["success"]),
            "seed_rewards": {str(t.metadata["seed"]): t.reward for t in played},
        }
    record = {
        "step": step,
        "label": label,
        **({"model": model} if model else {}),
        **episode_metrics(played),
        "failed": failed,
        **outcomes,
        **apart,
        "time_s": time.perf_counter() - started,
    }
    log.log_eval(record)
    save_eval_episodes(config.run_dir, label, [t for t in results if t is not None], config.episodes)
    print_plain(console, eval_line(record))


def warm_start(config: TrainConfig, console: Console) -> str:
    """Run the SFT stage (unless its model is already exported) and return the model folder RL starts from.

    SFT runs as its own `roll sft` process: its model, gradients and optimizer state (several GB) are gone
    when it ends, instead of staying in the driver for the whole RL run."""
    import subprocess
    import sys

    from roll.config import load_config
    from roll.sft.config import SFTConfig

    assert config.warm_start is not None
    stage = config.warm_start
    sft = load_config(SFTConfig, stage.sft_config, stage.overrides)
    model_dir = Path(sft.output_dir) / "model"
    if not _sft_model_is_current(sft, model_dir):
        console.print(f"Warm start: SFT with {stage.sft_config} into {sft.output_dir}")
        command = [sys.executable, "-m", "roll.cli", "sft", str(stage.sft_config), *stage.overrides]
        finished = subprocess.run([*command, "export_model=true"], check=False)
        if finished.returncode != 0 or not (model_dir / "config.json").is_file():
            raise WarmStartError(
                f"the SFT warm start failed (exit code {finished.returncode}; its output is above): fix "
                f"{stage.sft_config} or warm_start.overrides, or set warm_start: null to start RL from "
                "trainer.model"
            )
    return str(model_dir)


def _sft_model_is_current(sft: SFTConfig, model_dir: Path) -> bool:
    """An exported SFT model is reused only if it was trained with this very SFT config (its run's
    config.json), so editing the SFT config or its data path retrains instead of silently reusing."""
    import json

    recorded = model_dir.parent / "config.json"
    if not (model_dir / "config.json").is_file() or not recorded.is_file():
        return False
    ignored = {"resume", "export_model"}
    trained = {k: v for k, v in json.loads(recorded.read_text()).items() if k not in ignored}
    wanted = {k: v for k, v in json.loads(sft.model_dump_json()).items() if k not in ignored}
    return trained == wanted


class WarmStartError(RuntimeError):
    """The SFT stage before RL did not produce its model; the message says what to do."""
