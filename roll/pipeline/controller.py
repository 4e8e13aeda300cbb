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

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from roll.pipeline.cluster import Cluster, init_ray
from roll.pipeline.config import TrainConfig
from roll.pipeline.display import eval_line, print_summary, step_line
from roll.pipeline.episodes import save_eval_episodes, save_train_sample
from roll.pipeline.eval_reuse import STORE, EvaluationStore, evaluation_key
from roll.pipeline.rewards import train_rewards
from roll.pipeline.tracking import RunLog, episode_metrics
from roll.progress import StepProgress, print_plain
from roll.rollout.env_kind import EnvKind
from roll.rollout.envs import env_kind
from roll.rollout.episode import EpisodeTask
from roll.types import Trajectory

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
        resume=previous[1] if previous else None,
    )
    try:
        for line in cluster.env_run.describe():
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
        **cluster.env_run.metrics(),
        **{f"train/{k}": v for k, v in train_metrics.items()},
    }


def with_prepared_data(config: TrainConfig, console: Console) -> TrainConfig:
    """The env kind makes what the run needs before it starts (a terminal run with env.data: its tasks and
    SFT data, made or found cached); the returned config names it."""
    return env_kind(config.env.type).prepare(config, lambda line: print_plain(console, line))


def check_env_config(config: TrainConfig) -> None:
    """Stop before any actor starts when the env cannot run here: a GEM env that does not make and reset, or
    terminal tasks that do not load or whose images do not build (built here once for every worker)."""
    env_kind(config.env.type).check(config)


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
    kind = env_kind(config.env.type)
    tasks = cluster.env_run.eval_tasks(config.eval.episodes, config.eval.seed_offset)
    if not tasks:
        return
    started = time.perf_counter()
    key = reuse_key(config, kind, tasks, model)
    store = EvaluationStore(config.run_dir.parent / STORE)
    stored = store.load(key) if key is not None else None
    if stored is not None:
        results: list[Trajectory | None] = list(stored.results)
    else:
        results = cluster.evaluate(tasks, config.eval.sampling)
        if key is not None:
            store.save(key, config.run_dir.name, label, results)
    # The kind's main set gives the record's own fields; any other set (a terminal run's out-of-family
    # held-out tasks) is kept apart under its name.
    main, sets = kind.eval_sets(config.env, tasks, results, config.eval.episodes)
    played, failed, outcomes = main.played, main.failed, main.fields
    apart = {
        name: {**episode_metrics(other.played), "failed": other.failed, **other.fields}
        for name, other in sets.items()
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
        **({"reused": f"{stored.run} ({stored.label})"} if stored is not None else {}),
    }
    log.log_eval(record)
    save_eval_episodes(config.run_dir, label, [t for t in results if t is not None], config.episodes)
    print_plain(console, eval_line(record))


def reuse_key(config: TrainConfig, kind: EnvKind, tasks: list[EpisodeTask], model: str | None) -> str | None:
    """The store key of an evaluation of fixed weights (`model`: the base or SFT model), when it may be
    reused: greedy, eval.reuse on, and an env whose tasks content can identify."""
    if model is None or not config.eval.reuse or config.eval.sampling.temperature != 0:
        return None
    sources = kind.eval_sources(config.env)
    if sources is None:
        return None
    return evaluation_key(model, json.loads(config.model_dump_json()), tasks, sources)


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
    config.json), so editing the SFT config or its data path retrains instead of silently reusing. Where the
    run wrote its model does not change the model: a folder reached by a link or copied under another name
    is reused, not trained over."""
    recorded = model_dir.parent / "config.json"
    if not (model_dir / "config.json").is_file() or not recorded.is_file():
        return False
    ignored = {"resume", "export_model", "output_dir"}
    trained = {k: v for k, v in json.loads(recorded.read_text()).items() if k not in ignored}
    wanted = {k: v for k, v in json.loads(sft.model_dump_json()).items() if k not in ignored}
    return trained == wanted


class WarmStartError(RuntimeError):
    """The SFT stage before RL did not produce its model; the message says what to do."""
