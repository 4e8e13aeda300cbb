"""`rome data`: generate task families, validate them, collect and filter trajectories, export SFT data.

Heavy imports (docker, iflow's agent, the proxy) happen inside the command that needs them. The settings
models (CollectSettings, HeuristicLimits) load at start: `collect`'s and `filter`'s options are generated
from their fields (rock.model_options), so a field added to a model is an option without a CLI edit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.console import Console

from rock.model_options import model_options
from roll.rollout.terminal.config import CollectSettings

# --packages online|offline: the private fleet's package cache (rock.packages.mode), as for rome-bench.
from rome.bench.cli import Packages, PackagesOption
from rome.data.filter import HeuristicLimits

app = typer.Typer(
    help="The ROME data pipeline: tasks -> validation -> trajectories -> filters -> SFT data.",
    no_args_is_help=True,
)
console = Console()
errors = Console(stderr=True)


def fail(message: str, code: int = 2) -> typer.Exit:
    errors.print(f"[red]error:[/red] {message}", highlight=False)
    return typer.Exit(code)


def parse_knobs(pairs: list[str] | None) -> dict[str, object]:
    knobs: dict[str, object] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise fail(f"--knob {pair!r} is not KEY=VALUE (e.g. --knob level=1)")
        knobs[key.strip()] = int(value) if value.strip().lstrip("-").isdigit() else value.strip()
    return knobs


@app.command()
def families(
    seeds: Annotated[
        int, typer.Option(min=1, help="Seeds per level to count distinct instructions over.")
    ] = 1000,
) -> None:
    """List the task families, one per line: name, domain, distinct instructions per level (L1=N: how many
    different prompts seeds 0..SEEDS-1 make at level 1; held-out instances are drawn only from prompts no
    train instance has), and knobs."""
    from rome.data.families import FAMILIES
    from rome.data.families.base import LEVELS
    from rome.data.novelty import distinct_instructions

    for family in FAMILIES.values():
        counts = " ".join(
            f"L{level}={distinct_instructions(family, {'level': level}, range(seeds))}" for level in LEVELS
        )
        typer.echo(f"{family.name}\t{family.domain}\t{counts} (of {seeds} seeds)\t{family.knob_help()}")


@app.command()
def generate(
    family: Annotated[str, typer.Argument(help="Family name (see `rome data families`).")],
    out: Annotated[Path, typer.Option(help="Task-set folder (made if needed; existing tasks are kept).")],
    n: Annotated[int, typer.Option(min=1, help="Instances to generate.")] = 10,
    seed: Annotated[
        int, typer.Option(min=0, help="Seed of the first instance; the next get seed+1, ...")
    ] = 0,
    knob: Annotated[list[str] | None, typer.Option(help="KEY=VALUE difficulty knob (repeatable).")] = None,
) -> None:
    """Generate N instances of a family in the Harbor layout, deterministic in their seeds."""
    from rome.data.families import KnobError, UnknownFamily
    from rome.data.taskset import TaskSetError
    from rome.data.taskset import generate as run

    try:
        report = run(family, n, seed, out, parse_knobs(knob))
    except (UnknownFamily, KnobError, TaskSetError) as error:
        raise fail(str(error)) from error
    console.print(f"{family}: {len(report.written)} written, {len(report.unchanged)} already there, in {out}")


@app.command()
def split(
    tasks: Annotated[Path, typer.Argument(help="Task-set folder.")],
    eval_fraction: Annotated[float, typer.Option(help="Share of seeds held out for evaluation.")] = 0.2,
) -> None:
    """Record train and eval instances in split.json; a seed is wholly train or wholly eval."""
    from rome.data.taskset import TaskSetError
    from rome.data.taskset import split as run

    try:
        result = run(tasks, eval_fraction)
    except TaskSetError as error:
        raise fail(str(error)) from error
    repeats = (
        f"; {len(result.repeats)} held out of both (they repeat a train instruction or oracle)"
        if result.repeats
        else ""
    )
    console.print(
        f"{len(result.train)} train instances ({len(result.train_seeds)} seeds), {len(result.eval)} eval "
        f"({len(result.eval_seeds)} seeds){repeats}; written to {tasks / 'split.json'}"
    )


SandboxOption = Annotated[str, typer.Option(help="rock (a private local fleet, or --admin-url) or docker.")]
AdminOption = Annotated[
    str | None, typer.Option(envvar="ROCK_ADMIN_URL", help="Use this ROCK admin instead of a private fleet.")
]


def _mode(packages: Packages | None) -> Literal["online", "offline"] | None:
    return None if packages is None else packages.value  # type: ignore[return-value]


def _progress(total: int, label: str):  # type: ignore[no-untyped-def]
    from rome.bench.cli import _Progress

    return _Progress(total, label)


def _taskset_or_exit(tasks: Path):  # type: ignore[no-untyped-def]
    from rome.data.taskset import TaskSetError, read_manifest

    try:
        return read_manifest(tasks)
    except TaskSetError as error:
        raise fail(str(error)) from error


@app.command()
def validate(
    tasks: Annotated[Path, typer.Argument(help="Task-set folder.")],
    concurrency: Annotated[int, typer.Option(min=1, help="Trials run at once.")] = 2,
    output: Annotated[
        Path | None, typer.Option(help="Folder for the trials (default TASKS/.trials/validate).")
    ] = None,
    sandbox: SandboxOption = "rock",
    admin_url: AdminOption = None,
    packages: PackagesOption = None,
) -> None:
    """Oracle passes, nop fails, oracle passes again: invalid instances are listed and excluded downstream."""
    from rich.table import Table

    from rock.sdk.tables import print_table
    from rome.bench.runner import SANDBOX_KINDS, sandbox_provider
    from rome.data.validate import validate_taskset

    manifest = _taskset_or_exit(tasks)
    if sandbox not in SANDBOX_KINDS:
        raise fail(f"unknown --sandbox {sandbox!r}; choose one of {', '.join(SANDBOX_KINDS)}")
    output = output or tasks / ".trials" / "validate"
    progress = _progress(3 * len(manifest.instances), "validate:")
    with progress.progress, sandbox_provider(sandbox, admin_url, packages=_mode(packages)) as provider:
        result = validate_taskset(tasks, output, provider, concurrency, on_trial=progress)
    table = Table(title=f"invalid instances of {tasks} (excluded)")
    for col in ("task", "reasons"):
        table.add_column(col)
    for task_id, reasons in result.invalid.items():
        table.add_row(task_id, "; ".join(reasons))
    if result.invalid:
        print_table(console, table)
    console.print(
        f"{len(result.valid)} valid, {len(result.invalid)} invalid ({len(result.flaky)} flaky) of "
        f"{len(result.verdicts)}; verdicts in {tasks / 'validation.json'}, trials in {output}"
    )
    if not result.valid:
        raise typer.Exit(1)


@app.command()
@model_options(CollectSettings)
def collect(
    tasks: Annotated[Path, typer.Argument(help="Task-set folder (its valid instances, if validated).")],
    out: Annotated[Path, typer.Option(help="JSONL file of trajectories to write.")],
    settings: CollectSettings,
    admin_url: AdminOption = None,
    packages: PackagesOption = None,
) -> None:
    """Run the agent on every valid instance in ROCK sandboxes, its model calls recorded by the proxy."""
    from rome.bench.runner import sandbox_provider
    from rome.data.collect import CollectError
    from rome.data.collect import collect as run

    manifest = _taskset_or_exit(tasks)
    model = settings.model
    if settings.agent == "iflow" and model and model.startswith(("http://", "https://")):
        from rome.data.collect import check_endpoint

        try:
            check_endpoint(model)
        except CollectError as error:
            raise fail(str(error)) from error
    progress = _progress(len(manifest.instances) * settings.attempts, "collect:")
    counts = [0, 0]

    def on_record(record) -> None:  # type: ignore[no-untyped-def]
        counts[0 if record.verifier.passed else 1] += 1
        progress.progress.update(
            progress.bar,
            advance=1,
            description=f"collect: [green]{counts[0]} resolved[/green] [red]{counts[1]} not[/red]",
        )

    try:
        with progress.progress, sandbox_provider("rock", admin_url, packages=_mode(packages)) as provider:
            stats = run(tasks, out, settings, provider, on_record)
    except CollectError as error:
        raise fail(str(error)) from error
    console.print(
        f"{stats.trajectories} trajectories ({stats.resolved} resolved) on {stats.tasks} instances "
        f"({stats.skipped_invalid} invalid skipped) in {stats.seconds:.0f} s -> {out}"
    )


def _trajectory_errors():  # type: ignore[no-untyped-def]
    from rome.data.types import TrajectoryFileError

    return TrajectoryFileError


@app.command("filter")
@model_options(HeuristicLimits, param="limits")
def filter_command(
    source: Annotated[Path, typer.Argument(help="Trajectories from `rome data collect`.")],
    out: Annotated[Path, typer.Option(help="JSONL of the kept trajectories (report beside it).")],
    limits: HeuristicLimits,
    replay: Annotated[
        bool, typer.Option(help="Re-run kept trajectories in fresh sandboxes (needs ROCK).")
    ] = True,
    judge_url: Annotated[
        str | None, typer.Option(help="OpenAI-compatible URL of an LLM judge (optional).")
    ] = None,
    judge_model: Annotated[
        str | None, typer.Option(help="Judge model name (default: its first listed).")
    ] = None,
    judge_api_key: Annotated[
        str | None, typer.Option(envvar="ROME_JUDGE_API_KEY", help="Judge API key.")
    ] = None,
    workspace: Annotated[
        list[str] | None,
        typer.Option(help="Safety: folders the agent may delete in (default /app /tmp /var/tmp)."),
    ] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Replays run at once.")] = 2,
    admin_url: AdminOption = None,
    packages: PackagesOption = None,
) -> None:
    """Heuristic, safety, optional LLM judge and execution replay; counts and reasons in OUT.report.md."""
    import contextlib

    from rich.table import Table

    from rock.sdk.tables import print_table
    from rome.data.collect import CollectError
    from rome.data.filter import (
        Judge,
        ReplayCannotRun,
        filter_file,
        replay_stage,
        report_path,
    )
    from rome.data.safety import DEFAULT_WORKSPACE

    with contextlib.ExitStack() as stack:
        judge = None
        if judge_url:
            try:
                judge = Judge(judge_url, judge_model, judge_api_key)
            except CollectError as error:
                raise fail(str(error).replace("--model", "--judge-url")) from error
            stack.callback(judge.close)
        stage = None
        if replay:
            from rome.bench.runner import sandbox_provider

            provider = stack.enter_context(sandbox_provider("rock", admin_url, packages=_mode(packages)))
            stage = replay_stage(provider, concurrency)
        try:
            report = filter_file(source, out, limits, judge, stage, tuple(workspace or DEFAULT_WORKSPACE))
        except (_trajectory_errors(), ReplayCannotRun) as error:
            raise fail(str(error)) from error
    table = Table(title=f"{report.total} trajectories in, {report.kept} kept")
    for col in ("stage", "in", "kept", "reasons"):
        table.add_column(col)
    for row in report.stages:
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(row.reasons.items())) or "-"
        table.add_row(row.stage, str(row.entered), str(row.kept), reasons)
    print_table(console, table)
    console.print(f"kept -> {out}; report -> {report_path(out, 'md')}")


@app.command("export-sft")
def export_sft_command(
    source: Annotated[Path, typer.Argument(help="Filtered trajectories.")],
    out: Annotated[Path, typer.Option(help="JSONL for `roll sft` (data.path) and the warm start.")],
    stage: Annotated[
        int, typer.Option(min=1, max=2, help="1: all; 2: verified, replayed, shortest only.")
    ] = 1,
) -> None:
    """Conversations with error masks and task-aware relevance flags, plus OUT.stats.json."""
    from rome.data.export import export_sft

    try:
        stats = export_sft(source, out, stage)
    except _trajectory_errors() as error:
        raise fail(str(error)) from error
    console.print(
        f"stage {stage}: {stats.exported} of {stats.trajectories_in} trajectories, "
        f"{stats.assistant_turns} turns "
        f"({stats.error_turns} error-masked, {stats.irrelevant_turns} irrelevant) -> {out}"
    )


@app.command()
def funnel(
    tasks: Annotated[Path, typer.Option(help="Task-set folder.")],
    collected: Annotated[Path, typer.Option(help="Output of `rome data collect`.")],
    filtered: Annotated[Path, typer.Option(help="Output of `rome data filter` (its report beside it).")],
    exported: Annotated[Path, typer.Option(help="Output of `rome data export-sft`.")],
    out: Annotated[Path, typer.Option(help="Folder for report.md and funnel.png.")],
) -> None:
    """The run's funnel: generated, valid, collected, resolved, kept per filter, exported (report.md, PNG)."""
    from rome.data.funnel import funnel as run
    from rome.data.funnel import write_funnel
    from rome.data.taskset import TaskSetError

    for path in (collected, filtered.with_name(filtered.name + ".report.json"), exported):
        if not path.is_file():
            raise fail(f"{path} does not exist; run the pipeline's earlier stages first (see the README)")
    try:
        stages = run(tasks, collected, filtered, exported)
    except (TaskSetError, _trajectory_errors()) as error:
        raise fail(str(error)) from error
    markdown, png = write_funnel(stages, out)
    console.print(" -> ".join(f"{s.name} {s.total}" for s in stages))
    console.print(f"{markdown}, {png}")


@app.command("export-atif")
def export_atif_command(
    source: Annotated[Path, typer.Argument(help="Trajectories from `rome data collect` or `filter`.")],
    out: Annotated[Path, typer.Option(help="Folder for one ATIF trajectory file per record.")],
    token_ids: Annotated[
        bool, typer.Option(help="Also keep each call's token ids and logprobs (large files).")
    ] = False,
) -> None:
    """Trajectories as ATIF (Harbor's trajectory format), validated with the atif models."""
    from iflow.atif import AtifError
    from rome.data.atif import export_atif
    from rome.data.types import read_trajectories

    try:
        written = export_atif(list(read_trajectories(source)), out, token_ids)
    except (_trajectory_errors(), AtifError) as error:
        raise fail(str(error)) from error
    console.print(f"{len(written)} ATIF trajectories -> {out}")


@app.command("import-atif")
def import_atif_command(
    sources: Annotated[list[Path], typer.Argument(help="ATIF trajectory files, or folders of them.")],
    out: Annotated[Path, typer.Option(help="JSONL of trajectory records (for filter and export-sft).")],
) -> None:
    """ATIF trajectories from elsewhere (other agents, Harbor trials) as teacher data for the next stages."""
    from iflow.atif import AtifError
    from rome.data.atif import import_atif

    try:
        records = import_atif(sources, out)
    except AtifError as error:
        raise fail(str(error)) from error
    verified = sum(record.verifier.passed for record in records)
    console.print(f"{len(records)} trajectories ({verified} verified) -> {out}")


@app.command()
def prepare(
    env: Annotated[
        str,
        typer.Argument(
            help="File of the env section of a terminal run as JSON (a `roll train` config's `env`, with "
            "env.data set); - reads it from stdin."
        ),
    ] = "-",
    out: Annotated[
        Path | None,
        typer.Option(
            help="Write the prepared data here (JSON: dataset folder, tasks_dir, train and held-out ids, SFT "
            "file, experts, summary). Without it, the summary and the path of the dataset folder's "
            "prepared.json (the same JSON) are printed last."
        ),
    ] = None,
) -> None:
    """The data stage of a terminal run with env.data (`roll train` runs this command before training): make,
    or find cached under $ALE_HOME/datasets, its tasks and SFT data. One progress line per step on stdout; a
    failure is one line `error: ...` on stderr and exit status 2."""
    import json
    import sys

    from rock.sdk.configs import ConfigError, validate_config
    from roll.rollout.terminal.config import TerminalEnvConfig
    from roll.rollout.terminal.data_stage import DataStageError
    from rome.data.recipe import PREPARED
    from rome.data.recipe import prepare as run

    def stop(message: str) -> typer.Exit:
        # Plain and on one line (no rich wrapping): the caller relays this line as the stage's error.
        head, *rest = [line.strip().removeprefix("- ") for line in message.splitlines() if line.strip()]
        sys.stderr.write(f"error: {' '.join([head, '; '.join(rest)]).strip()}\n")
        return typer.Exit(2)

    source = "stdin" if env == "-" else env
    try:
        section = validate_config(
            TerminalEnvConfig,
            json.loads(sys.stdin.read() if env == "-" else Path(env).read_text()),
            f"env section ({source})",
        )
    except ConfigError as error:  # names the key and what it allows
        raise stop(str(error)) from error
    except (OSError, ValueError) as error:  # json.JSONDecodeError is a ValueError
        raise stop(f"cannot read the env section from {source} as JSON: {error}") from error
    if section.data is None:
        raise stop(f"the env section from {source} has no data (env.data): there is nothing to prepare")
    try:
        prepared = run(section, lambda line: print(line, flush=True))
    except DataStageError as error:
        raise stop(str(error)) from error
    if out is not None:
        out.write_text(prepared.model_dump_json(indent=2) + "\n")
        return
    for line in prepared.summary:
        print(line)
    print(prepared.folder / PREPARED)
