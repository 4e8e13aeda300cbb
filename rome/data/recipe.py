"""The data stage of a terminal training run (`env.data` in `roll train`): generate, validate, collect,
filter and export, the same steps as `rome data`, cached by content.

The task set and its validation live in $ALE_HOME/datasets/tasks-<key>, keyed by the digest of every
instance the generators make (so changing a generator's code makes a new folder instead of reusing stale
tasks). The trajectories and SFT data live in $ALE_HOME/datasets/<key>, whose key also hashes the stage's
settings and iflow's prompt profile, so collecting again in another profile reuses the validated tasks. Each
step leaves its file behind and a rerun skips the steps whose files exist; `prepared.json`, written last,
marks a complete folder.

roll runs it in a child process, `rome data prepare` (rome.data.cli), and reads the prepared data back as
JSON: roll never imports this pipeline, which sits above it."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Literal

from rock.runtime.home import ale_home
from roll.rollout.terminal.config import TerminalDataConfig, TerminalEnvConfig
from roll.rollout.terminal.data_stage import DataStageError, PreparedTerminalData
from rome.data.balance import NotEnoughOperations, balanced_instances
from rome.data.families import Family, Instance, KnobError, UnknownFamily, get_family
from rome.data.layout import digest, render
from rome.data.novelty import NotEnoughNewInstances, SeenTasks, new_instances
from rome.terminal_tasks.sandbox import SandboxProvider

# The validated task set's key: the instances alone (how they are collected does not change a verdict).
TASKS_FORMAT = "rome-data-recipe/2"
# The dataset's key. Format 3: the environment the teacher's prompts state (env.agent.environment_date and
# environment_os) joined it; format 2's conversations carry the day and the machine they were collected on.
RECIPE_FORMAT = "rome-data-recipe/3"
PREPARED = "prepared.json"


# train: SFT imitates them (and RL plays them unless env.data.rl_per_family asks for instances of its own);
# rl: only RL plays them; eval and out-of-family: the held-out sets.
Side = Literal["train", "rl", "eval", "out-of-family"]


def _family(name: str, knobs: dict[str, str | int | float | bool], key: str) -> Family:
    try:
        family = get_family(name)
        family.parse_knobs(dict(knobs))
    except (UnknownFamily, KnobError) as error:
        raise DataStageError(f"env.data.{key}: {error}") from error
    return family


def planned_instances(data: TerminalDataConfig) -> dict[str, tuple[Side, str]]:
    """Task id -> (side, content digest) of every instance the stage makes, in the order training and
    evaluation play them: train instances seed by seed, family by family (group g plays task g mod N, so a
    run of a few steps meets every family from its first steps), then the RL-only ones and the held-out ones
    likewise.

    RL-only and held-out mean new: a candidate whose instruction or oracle commands repeat a train
    instance's, or one chosen before it, is skipped for the next seed."""
    trained = {name: _family(name, knobs, "families") for name, knobs in data.families.items()}
    apart = {name: _family(name, knobs, "out_of_family") for name, knobs in data.out_of_family.items()}
    train: dict[str, Instance] = {}
    for name, family in trained.items():
        for instance in _train_instances(data, name, family):
            train[instance.task_id] = instance
    seen = SeenTasks()
    for instance in train.values():
        seen.add(instance)
    new: dict[Side, list[Instance]] = {"rl": [], "eval": [], "out-of-family": []}
    rl = (data.train_seed + data.train_seed_span, data.rl_per_family, data.rl_seed_span)
    held_out = (data.eval_seed, data.eval_per_family, data.held_out_seed_span)
    for side, families, knobs_of, key, (first, count, span) in (
        ("rl", trained, data.families, "families", rl),
        ("eval", trained, data.families, "families", held_out),
        ("out-of-family", apart, data.out_of_family, "out_of_family", held_out),
    ):
        if not count:
            continue
        for name, family in families.items():
            try:
                new[side] += new_instances(
                    lambda seed, f=family, k=knobs_of[name]: f.make(seed, dict(k)),  # type: ignore[misc]
                    first,
                    count,
                    seen,
                    span,
                    f"env.data.{key}.{name}",
                    *(("RL-only", "rl_per_family") if side == "rl" else ()),
                )
            except NotEnoughNewInstances as error:
                raise DataStageError(str(error)) from error
    planned: dict[str, tuple[Side, str]] = {}
    for side, instances in (("train", list(train.values())), *new.items()):
        for instance in sorted(instances, key=lambda i: (i.seed, i.family)):
            planned[instance.task_id] = (side, digest(render(instance)))  # type: ignore[assignment]
    return planned


def _train_instances(data: TerminalDataConfig, name: str, family: Family) -> list[Instance]:
    """The family's train instances: the train_per_family seeds from train_seed, or with balance_train as
    many spread evenly over the family's operations."""
    knobs = data.families[name]
    if not data.balance_train:
        return [
            family.make(seed, dict(knobs))
            for seed in range(data.train_seed, data.train_seed + data.train_per_family)
        ]
    try:
        return balanced_instances(
            lambda seed: family.make(seed, dict(knobs)),
            data.train_seed,
            data.train_per_family,
            data.train_seed_span,
            f"env.data.families.{name}",
        )
    except NotEnoughOperations as error:
        raise DataStageError(str(error)) from error


def _key(identity: object) -> str:
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


def tasks_key(planned: dict[str, tuple[Side, str]]) -> str:
    return _key({"format": TASKS_FORMAT, "instances": sorted(f"{t}:{d}" for t, (_, d) in planned.items())})


def dataset_key(env: TerminalEnvConfig, planned: dict[str, tuple[Side, str]]) -> str:
    """The dataset folder's key. The instances are hashed in their planned order: that order is the order
    training plays them, so a change to it makes a new folder instead of reusing a stale prepared.json."""
    assert env.data is not None
    return _key(
        {
            "format": RECIPE_FORMAT,
            "data": _recipe_identity(env.data),
            "prompt_profile": env.agent.prompt_profile,
            "environment": [env.agent.environment_date, env.agent.environment_os],
            "instances": [f"{task_id}:{side}:{d}" for task_id, (side, d) in planned.items()],
        }
    )


def _recipe_identity(data: TerminalDataConfig) -> dict[str, object]:
    """The recipe's fields that change the data (concurrency only changes how fast it is made)."""
    return data.model_dump(mode="json", exclude={"concurrency"})


def prepare(env: TerminalEnvConfig, say: Callable[[str], None]) -> PreparedTerminalData:
    """Make (or find) the run's tasks and SFT data; `say` gets one line per step."""
    data = env.data
    assert data is not None
    planned = planned_instances(data)
    datasets = ale_home() / "datasets"
    folder = datasets / dataset_key(env, planned)
    if (folder / PREPARED).is_file():
        prepared = PreparedTerminalData.model_validate_json((folder / PREPARED).read_text())
        say(f"data: reusing {folder} (same families, seeds, generators and profile)")
        return prepared
    folder.mkdir(parents=True, exist_ok=True)
    say(f"data: making {len(planned)} instances and their SFT data in {folder}")
    tasks = datasets / f"tasks-{tasks_key(planned)}"
    _generate(data, tasks, planned)
    with _sandboxes(env) as provider:
        sides = _validate(data, tasks, provider, planned, say)
        sft_ids, eval_ids = sides["train"], sides["eval"]
        rl_ids = sides["rl"] if data.rl_per_family else sft_ids
        for ids, what in ((sft_ids, "train"), (rl_ids, "RL-only")):
            if not ids:
                raise DataStageError(
                    f"no {what} instance of env.data is valid (see {tasks / 'validation.json'}); fix the "
                    "families' knobs or pick other families"
                )
        collected = _collect(env, tasks, folder, provider, set(sft_ids), say)
        kept = _filter(data, collected, folder, provider, say)
    sft = _export(data, kept, folder, say)
    _keep_as_atif(kept, folder, say)
    report = _funnel(tasks, collected, kept, sft, folder)
    prepared = PreparedTerminalData(
        folder=folder,
        tasks_dir=tasks,
        train_ids=rl_ids,
        eval_ids=eval_ids,
        out_of_family_ids=sides["out-of-family"],
        sft_path=sft,
        experts=kept,
        summary=[
            f"data: {len(sft_ids)} train"
            + (f" (SFT; {len(rl_ids)} more that only RL plays)" if data.rl_per_family else "")
            + f", {len(eval_ids)} held-out and {len(sides['out-of-family'])} out-of-family instances, "
            f"SFT data {sft}; funnel in {report}"
        ],
    )
    (folder / PREPARED).write_text(prepared.model_dump_json(indent=2) + "\n")
    return prepared


def _sandboxes(env: TerminalEnvConfig) -> AbstractContextManager[SandboxProvider]:
    from rome.bench.runner import sandbox_provider

    return sandbox_provider("rock", env.rock.admin_url, packages=env.rock.packages)


def _generate(data: TerminalDataConfig, tasks: Path, planned: dict[str, tuple[Side, str]]) -> None:
    from rome.data.taskset import generate_seeds

    knobs = {**data.families, **data.out_of_family}
    seeds: dict[str, list[int]] = {name: [] for name in knobs}
    for task_id in planned:
        name, seed = task_id.rsplit("-", 1)
        seeds[name].append(int(seed))
    for name, chosen in seeds.items():
        generate_seeds(name, chosen, tasks, dict(knobs[name]))


def _validate(
    data: TerminalDataConfig,
    tasks: Path,
    provider: SandboxProvider,
    planned: dict[str, tuple[Side, str]],
    say: Callable[[str], None],
) -> dict[Side, list[str]]:
    """The valid instances of each side, in planned order. Instances this machine could not judge (an infra
    failure, not the task's fault) are never cached as verdicts: they stop the stage, and a rerun retries
    them alone."""
    from rome.data.validate import read_validation, validate_taskset

    validation = read_validation(tasks)
    retry = sorted(validation.unjudged) if validation is not None else None
    if validation is None or retry:
        started = time.monotonic()
        trials = tasks / ".trials" / "validate"
        validation = validate_taskset(tasks, trials, provider, data.concurrency, only=retry)
        say(
            f"data: validated {len(retry) if retry else len(validation.verdicts)} instances in "
            f"{time.monotonic() - started:.0f} s: {len(validation.valid)} valid (oracle passes twice, nop "
            "fails)"
        )
    if unjudged := validation.unjudged:
        first, reasons = next(iter(unjudged.items()))
        raise DataStageError(
            f"{len(unjudged)} of {len(validation.verdicts)} instances could not be judged on this machine "
            f"(first, {first}: {'; '.join(reasons)}); that is the machine, not the tasks: check that Docker "
            "answers (`docker info`) and the task images build, then rerun (only those instances are "
            "validated again)"
        )
    valid = set(validation.valid)
    for task_id, reasons in sorted(validation.invalid.items()):
        say(f"data: {task_id} is invalid and left out: {'; '.join(reasons)}")
    sides: dict[Side, list[str]] = {"train": [], "rl": [], "eval": [], "out-of-family": []}
    for task_id, (side, _) in planned.items():
        if task_id in valid:
            sides[side].append(task_id)
    return sides


def _collect(
    env: TerminalEnvConfig,
    tasks: Path,
    folder: Path,
    provider: SandboxProvider,
    train_ids: set[str],
    say: Callable[[str], None],
) -> Path:
    from rome.data.collect import collect, stats_path

    assert env.data is not None
    out = folder / "collected.jsonl"
    if stats_path(out).is_file():
        return out
    stats = collect(tasks, out, env.data.collect_settings(env.agent), provider, only=train_ids)
    say(
        f"data: collected {stats.trajectories} oracle-teacher trajectories ({stats.resolved} resolved) on "
        f"{stats.tasks} train instances in {stats.seconds:.0f} s"
    )
    return out


def _filter(
    data: TerminalDataConfig,
    collected: Path,
    folder: Path,
    provider: SandboxProvider,
    say: Callable[[str], None],
) -> Path:
    from rome.data.filter import ReplayCannotRun, filter_file, replay_stage

    out = folder / "kept.jsonl"
    if out.is_file():
        return out
    started = time.monotonic()
    stage = replay_stage(provider, data.concurrency) if data.replay else None
    try:
        report = filter_file(collected, out, replay=stage)
    except ReplayCannotRun as error:
        raise DataStageError(str(error)) from error
    dropped = ", ".join(f"{row.stage} -{row.entered - row.kept}" for row in report.stages)
    say(
        f"data: kept {report.kept} of {report.total} trajectories ({dropped}) in "
        f"{time.monotonic() - started:.0f} s"
    )
    return out


def _export(data: TerminalDataConfig, kept: Path, folder: Path, say: Callable[[str], None]) -> Path:
    from rome.data.export import export_sft

    out = folder / "sft.jsonl"
    if not out.is_file():
        stats = export_sft(kept, out, data.sft_stage)
        say(
            f"data: exported {stats.exported} SFT conversations, {stats.assistant_turns} assistant turns "
            f"({stats.error_turns} error-masked)"
        )
    return out


def _keep_as_atif(kept: Path, folder: Path, say: Callable[[str], None]) -> Path:
    """The kept trajectories also as ATIF files (folder/atif/), written whole or not at all."""
    import shutil

    from rome.data.atif import export_atif
    from rome.data.types import read_trajectories

    out = folder / "atif"
    if not out.is_dir():
        partial = folder / "atif.partial"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        written = export_atif(list(read_trajectories(kept)), partial)
        partial.rename(out)
        say(f"data: {len(written)} kept trajectories as ATIF in {out}")
    return out


def _funnel(tasks: Path, collected: Path, kept: Path, sft: Path, folder: Path) -> Path:
    from rome.data.funnel import funnel, write_funnel

    markdown, _png = write_funnel(funnel(tasks, collected, kept, sft), folder / "funnel")
    return markdown
