"""The data stage of a terminal training run (`env.data` in `roll train`): generate, validate, collect,
filter and export, the same steps as `rome data`, cached by content.

The task set and its validation live in $ALE_HOME/datasets/tasks-<key>, keyed by the digest of every
instance the generators make (so changing a generator's code makes a new folder instead of reusing stale
tasks). The trajectories and SFT data live in $ALE_HOME/datasets/<key>, whose key also hashes the stage's
settings and iflow's prompt profile, so collecting again in another profile reuses the validated tasks. Each
step leaves its file behind and a rerun skips the steps whose files exist; `prepared.json`, written last,
marks a complete folder.

Registered for roll under the entry-point group `roll.terminal_data` (pyproject.toml)."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

from rock.runtime.home import ale_home
from roll.rollout.terminal.config import TerminalDataConfig, TerminalEnvConfig
from roll.rollout.terminal.data_stage import DataStageError, PreparedTerminalData
from rome.data.families import KnobError, UnknownFamily, get_family
from rome.data.layout import digest, render
from rome.terminal_tasks.sandbox import SandboxProvider

RECIPE_FORMAT = "rome-data-recipe/1"
PREPARED = "prepared.json"
COLLECT_MAX_TURNS = 30


def planned_instances(data: TerminalDataConfig) -> dict[str, tuple[str, str]]:
    """Task id -> (side, content digest) of every instance the stage makes; side is train or eval."""
    planned: dict[str, tuple[str, str]] = {}
    for name, knobs in data.families.items():
        try:
            family = get_family(name)
            family.parse_knobs(dict(knobs))
        except (UnknownFamily, KnobError) as error:
            raise DataStageError(f"env.data.families: {error}") from error
        sides = (
            ("train", data.train_seed, data.train_per_family),
            ("eval", data.eval_seed, data.eval_per_family),
        )
        for side, first, count in sides:
            for seed in range(first, first + count):
                instance = family.make(seed, dict(knobs))
                planned[instance.task_id] = (side, digest(render(instance)))
    return planned


def _key(identity: object) -> str:
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


def tasks_key(planned: dict[str, tuple[str, str]]) -> str:
    return _key({"format": RECIPE_FORMAT, "instances": sorted(f"{t}:{d}" for t, (_, d) in planned.items())})


def dataset_key(env: TerminalEnvConfig, planned: dict[str, tuple[str, str]]) -> str:
    assert env.data is not None
    return _key(
        {
            "format": RECIPE_FORMAT,
            "data": env.data.model_dump(mode="json", exclude={"concurrency"}),
            "prompt_profile": env.agent.prompt_profile,
            "instances": sorted(f"{task_id}:{side}:{d}" for task_id, (side, d) in planned.items()),
        }
    )


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
    _generate(data, tasks)
    with _sandboxes(env) as provider:
        train_ids, eval_ids = _validate(data, tasks, provider, planned, say)
        if not train_ids:
            raise DataStageError(
                f"no train instance of env.data is valid (see {tasks / 'validation.json'}); fix the "
                "families' knobs or pick other families"
            )
        collected = _collect(env, tasks, folder, provider, set(train_ids), say)
        kept = _filter(data, collected, folder, provider, say)
    sft = _export(data, kept, folder, say)
    report = _funnel(tasks, collected, kept, sft, folder)
    prepared = PreparedTerminalData(
        folder=folder,
        tasks_dir=tasks,
        train_ids=train_ids,
        eval_ids=eval_ids,
        sft_path=sft,
        experts=kept,
        summary=[
            f"data: {len(train_ids)} train and {len(eval_ids)} held-out instances, SFT data {sft}; "
            f"funnel in {report}"
        ],
    )
    (folder / PREPARED).write_text(prepared.model_dump_json(indent=2) + "\n")
    return prepared


def _sandboxes(env: TerminalEnvConfig) -> AbstractContextManager[SandboxProvider]:
    from rome.bench.runner import sandbox_provider

    return sandbox_provider("rock", env.rock.admin_url, packages=env.rock.packages)


def _generate(data: TerminalDataConfig, tasks: Path) -> None:
    from rome.data.taskset import generate

    for name, knobs in data.families.items():
        generate(name, data.train_per_family, data.train_seed, tasks, dict(knobs))
        generate(name, data.eval_per_family, data.eval_seed, tasks, dict(knobs))


def _validate(
    data: TerminalDataConfig,
    tasks: Path,
    provider: SandboxProvider,
    planned: dict[str, tuple[str, str]],
    say: Callable[[str], None],
) -> tuple[list[str], list[str]]:
    from rome.data.validate import read_validation, validate_taskset

    validation = read_validation(tasks)
    if validation is None:
        started = time.monotonic()
        trials = tasks / ".trials" / "validate"
        validation = validate_taskset(tasks, trials, provider, data.concurrency)
        say(
            f"data: validated {len(validation.verdicts)} instances in {time.monotonic() - started:.0f} s: "
            f"{len(validation.valid)} valid (oracle passes twice, nop fails)"
        )
    valid = set(validation.valid)
    # Seed by seed, family by family: training plays task g mod N for group g, so a run of a few steps
    # meets every family from its first steps instead of the alphabetically first ones only.
    train = [t for t, (side, _) in planned.items() if side == "train" and t in valid]
    held_out = [t for t, (side, _) in planned.items() if side == "eval" and t in valid]
    train.sort(key=lambda t: (int(t.rsplit("-", 1)[1]), t))
    held_out.sort(key=lambda t: (int(t.rsplit("-", 1)[1]), t))
    for task_id, reasons in sorted(validation.invalid.items()):
        say(f"data: {task_id} is invalid and left out: {'; '.join(reasons)}")
    return train, held_out


def _collect(
    env: TerminalEnvConfig,
    tasks: Path,
    folder: Path,
    provider: SandboxProvider,
    train_ids: set[str],
    say: Callable[[str], None],
) -> Path:
    from rome.data.collect import CollectSettings, collect, stats_path

    assert env.data is not None
    out = folder / "collected.jsonl"
    if stats_path(out).is_file():
        return out
    settings = CollectSettings(
        agent="oracle-teacher",
        attempts=env.data.attempts,
        concurrency=env.data.concurrency,
        mistake_rate=env.data.mistake_rate,
        max_turns=COLLECT_MAX_TURNS,
        prompt_profile=env.agent.prompt_profile,
    )
    stats = collect(tasks, out, settings, provider, only=train_ids)
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
    from rome.data.filter import filter_file, replay_stage

    out = folder / "kept.jsonl"
    if out.is_file():
        return out
    started = time.monotonic()
    stage = replay_stage(provider, data.concurrency) if data.replay else None
    report = filter_file(collected, out, replay=stage)
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


def _funnel(tasks: Path, collected: Path, kept: Path, sft: Path, folder: Path) -> Path:
    from rome.data.funnel import funnel, write_funnel

    markdown, _png = write_funnel(funnel(tasks, collected, kept, sft), folder / "funnel")
    return markdown
