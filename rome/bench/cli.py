"""`rome-bench`: run an agent over terminal tasks in ROCK sandboxes, or validate a task suite."""

from __future__ import annotations

import contextlib
import datetime as dt
import enum
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from rock.packages.mode import PackagesMode

app = typer.Typer(help="ROME bench: terminal tasks graded by their own tests.", no_args_is_help=True)


@app.callback()
def _exit_cleanly_on_sigterm() -> None:
    """SIGTERM (from `timeout`, a scheduler) unwinds like Ctrl-C, so sandboxes and the private fleet stop."""
    import signal
    import sys

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


ALLOW_INTERNET_HELP = (
    "Give tasks that ask for the internet a full (bridge) network; without it they get the package cache."
)
DEFAULT_TASKS = Path(__file__).resolve().parent.parent / "tasks" / "terminal-pro"


class Packages(enum.StrEnum):
    online = "online"
    offline = "offline"


PackagesOption = Annotated[
    Packages | None,
    typer.Option(
        "--packages",
        envvar="ALE_PACKAGES",
        help="online|offline: the private fleet's package cache fetches from PyPI/Debian (online, the "
        "default; offline when they cannot be reached) or serves only what is seeded (offline).",
    ),
]


def _load(tasks_dir: Path, task_ids: list[str] | None):  # type: ignore[no-untyped-def]
    from rich.console import Console

    from rome.terminal_tasks.task import load_tasks

    console = Console(stderr=True)
    try:
        suite = load_tasks(tasks_dir, task_ids or None)
    except (FileNotFoundError, KeyError) as exc:
        console.print(f"[red]error:[/red] {exc.args[0]}")
        raise typer.Exit(2) from exc
    for error in suite.errors:
        console.print(f"[yellow]skipping malformed task[/yellow] {error}")
    if not suite.tasks:
        console.print(f"[red]error:[/red] no loadable task under {tasks_dir}")
        raise typer.Exit(2)
    return suite


def _check_sandbox(kind: str) -> None:
    from rome.bench.runner import SANDBOX_KINDS

    if kind not in SANDBOX_KINDS:
        typer.secho(f"error: unknown --sandbox {kind!r}; choose one of {', '.join(SANDBOX_KINDS)}", fg="red")
        raise typer.Exit(2)


class _Progress:
    """Live progress: one bar over all trials, each agent's passes, failures and infra errors counted."""

    def __init__(self, total: int, label: str) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()
        )
        self.counts: dict[str, list[int]] = {}
        self.label = label
        self.bar = self.progress.add_task(label, total=total)

    def __call__(self, trial) -> None:  # type: ignore[no-untyped-def]
        # Infra errors are counted apart: a trial this machine could not run is not a failure of the task.
        counts = self.counts.setdefault(trial.agent, [0, 0, 0])
        counts[0 if trial.passed else 2 if trial.verdict == "infra_error" else 1] += 1
        text = " | ".join(
            f"{agent} [green]{p} passed[/green] [red]{f} failed[/red]"
            + (f" [yellow]{i} infra[/yellow]" if i else "")
            for agent, (p, f, i) in self.counts.items()
        )
        self.progress.update(self.bar, advance=1, description=f"{self.label} {text}")


def _check_agent_setup(agent: str, model: str | None, sandbox: str, console) -> None:  # type: ignore[no-untyped-def]
    """Stop before any trial when the agent cannot run as configured (each trial would fail the same way)."""
    if agent != "iflow":
        return
    from rome.bench.model_server import serves_locally

    problem = None
    if sandbox != "rock":
        problem = "the iflow agent runs its tools through ROCK sandboxes: use --sandbox rock"
    elif model is None:
        problem = (
            "--agent iflow needs --model: builtin:smollm2-135m-instruct or a model folder (served for the "
            "run), an OpenAI-compatible base URL, or a model name whose endpoint iFlow's settings give "
            "(baseUrl)"
        )
    elif not serves_locally(model):
        problem = _endpoint_problem(model)
    if problem:
        from rich.markup import escape

        console.print(f"[red]error:[/red] {escape(problem)}", soft_wrap=True)
        raise typer.Exit(2)


def _endpoint_problem(model: str) -> str | None:
    """Why iFlow could not reach `model` (a base URL, or a name for the endpoint in its settings), or None."""
    import shutil
    import tempfile

    from iflow.agent.build import AgentOptions, ConfigurationError, llm_config
    from iflow.settings import SettingsError, load_settings
    from rome.bench.iflow_agent import resolve_endpoint

    empty = Path(tempfile.mkdtemp(prefix="rome-iflow-"))  # as the agent does: no project settings leak in
    try:
        base_url, name = resolve_endpoint(model)
        llm_config(load_settings(empty), AgentOptions(cwd=empty, base_url=base_url, model=name))
    except (RuntimeError, ConfigurationError, SettingsError) as error:
        return f"iflow cannot use --model {model}: {error}"
    finally:
        shutil.rmtree(empty, ignore_errors=True)
    return None


def _serve_model(  # type: ignore[no-untyped-def]
    agent: str, model: str | None, output: Path, console
) -> tuple[contextlib.ExitStack, str | None]:
    """For iflow with a model of ours: `roll serve` it on loopback for the run. Returns the stack that stops
    it and the model the agent is given (the server's URL; iFlow asks it for the model's name). A model that
    cannot be served stops the run here, before any trial."""
    from rich.markup import escape

    from rome.bench.model_server import ModelServerError, served_model, serves_locally

    stack = contextlib.ExitStack()
    if agent != "iflow" or model is None or not serves_locally(model):
        return stack, model
    log = output / "model-server.log"
    console.print(f"serving {model} for this run (roll serve on 127.0.0.1; log {log})")
    try:
        url = stack.enter_context(served_model(model, log))
    except ModelServerError as error:
        console.print(f"[red]error:[/red] {escape(str(error))}", soft_wrap=True)
        raise typer.Exit(2) from error
    return stack, url


@app.command("terminal-pro")
def terminal_pro(
    tasks: Annotated[
        Path, typer.Option(help="Folder of tasks (Harbor or Terminal-Bench layout).")
    ] = DEFAULT_TASKS,
    agent: Annotated[str, typer.Option(help="oracle | nop | iflow")] = "oracle",
    model: Annotated[
        str | None,
        typer.Option(
            help="iflow's model: builtin:ID or a model folder (served for the run by roll serve on "
            "loopback), an OpenAI-compatible base URL, or a model name for the endpoint in iFlow's settings."
        ),
    ] = None,
    n_attempts: Annotated[int, typer.Option(min=1, help="Attempts per task (k).")] = 1,
    concurrency: Annotated[int, typer.Option(min=1, help="Trials run at once.")] = 1,
    task_id: Annotated[list[str] | None, typer.Option(help="Run only these task ids (repeatable).")] = None,
    output: Annotated[Path | None, typer.Option(help="Run folder; an existing one is resumed.")] = None,
    timeout_multiplier: Annotated[
        float, typer.Option(min=0.01, help="Scale every task's agent and verifier timeouts.")
    ] = 1.0,
    sandbox: Annotated[str, typer.Option(help="rock (a private local fleet) or docker.")] = "rock",
    admin_url: Annotated[
        str | None,
        typer.Option(
            envvar="ROCK_ADMIN_URL",
            help="Use this ROCK admin (`rock admin serve`) instead of starting a private fleet; it builds "
            "the task images, so the tasks folder must be under one of its --build-context-root folders.",
        ),
    ] = None,
    allow_internet: Annotated[bool, typer.Option(help=ALLOW_INTERNET_HELP)] = False,
    packages: PackagesOption = None,
) -> None:
    """Run an agent over the tasks and write per-trial JSON, summary.json, report.md and charts."""
    from rich.console import Console
    from rich.table import Table

    from rock.sdk.tables import print_table, save_table
    from rome.bench.agents import AGENT_NAMES
    from rome.bench.report import write_report
    from rome.bench.runner import run_trials, sandbox_provider, write_run_config

    console = Console()
    if agent not in AGENT_NAMES:
        console.print(f"[red]error:[/red] unknown agent {agent!r}; choose one of {', '.join(AGENT_NAMES)}")
        raise typer.Exit(2)
    _check_sandbox(sandbox)
    _check_agent_setup(agent, model, sandbox, console)
    suite = _load(tasks, task_id)
    run_tasks = [
        t.model_copy(
            update={
                "agent_timeout_sec": t.agent_timeout_sec * timeout_multiplier,
                "verifier_timeout_sec": t.verifier_timeout_sec * timeout_multiplier,
            }
        )
        for t in suite.tasks
    ]
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    output = output or Path("runs") / f"terminal-pro-{agent}-{stamp}"
    config = {"tasks": str(tasks.resolve()), "agent": agent, "model": model, "n_attempts": n_attempts}
    config["timeout_multiplier"] = timeout_multiplier
    previous = output / "run.json"
    if previous.is_file():
        old = json.loads(previous.read_text())
        if {k: old.get(k) for k in config} != config:
            console.print(
                f"[red]error:[/red] {output} holds a run with other settings ({old}); pick another --output"
            )
            raise typer.Exit(2)
        console.print(f"resuming the run in {output}")
    output.mkdir(parents=True, exist_ok=True)
    write_run_config(output, config)
    serving, agent_model = _serve_model(agent, model, output, console)
    progress = _Progress(len(suite.tasks) * n_attempts, "terminal-pro:")
    with (
        serving,
        progress.progress,
        sandbox_provider(sandbox, admin_url, allow_internet, _mode(packages)) as provider,
    ):
        trials = run_trials(
            run_tasks, agent, output, n_attempts, concurrency, agent_model, provider, on_trial=progress
        )
    summary = write_report(
        output, trials, f"rome-bench terminal-pro: {agent}" + (f" ({model})" if model else "")
    )
    overall = summary.overall
    table = Table(title=f"{agent}: pass@1 {overall.pass_at_1:.3f}, avg@{n_attempts} {overall.avg_at_k:.3f}")
    for col in ("domain", "tasks", "pass@1", "avg@k", "pass@k"):
        table.add_column(col)
    for name, group in summary.by_category.items():
        ks = " ".join(f"@{k}:{v:.2f}" for k, v in group.pass_at_k.items())
        table.add_row(name, str(group.tasks), f"{group.pass_at_1:.3f}", f"{group.avg_at_k:.3f}", ks)
    print_table(console, table)
    console.print(f"report: {output / 'report.md'}; table: {save_table(table, output / 'summary.txt')}")


@app.command()
def validate(
    tasks_dir: Annotated[Path, typer.Argument(help="Folder of tasks, or one task folder.")] = DEFAULT_TASKS,
    concurrency: Annotated[int, typer.Option(min=1, help="Trials run at once.")] = 2,
    task_id: Annotated[list[str] | None, typer.Option(help="Validate only these task ids.")] = None,
    output: Annotated[Path | None, typer.Option(help="Folder for the validation trials.")] = None,
    sandbox: Annotated[str, typer.Option(help="rock (a private local fleet) or docker.")] = "rock",
    admin_url: Annotated[
        str | None,
        typer.Option(
            envvar="ROCK_ADMIN_URL",
            help="Use this ROCK admin (`rock admin serve`) instead of starting a private fleet; it builds "
            "the task images, so the tasks folder must be under one of its --build-context-root folders.",
        ),
    ] = None,
    allow_internet: Annotated[bool, typer.Option(help=ALLOW_INTERNET_HELP)] = False,
    packages: PackagesOption = None,
) -> None:
    """Check every task: the oracle passes it and the nop agent fails it. Exits 1 when a task is broken,
    3 when none is but some cannot run here (an infra error: no image, no network, no verifier)."""
    from rich.console import Console

    from rome.bench.runner import sandbox_provider
    from rome.bench.validate import validate_tasks
    from rome.terminal_tasks.task import load_tasks

    console = Console()
    _check_sandbox(sandbox)
    try:
        suite = load_tasks(tasks_dir, task_id or None)
    except (FileNotFoundError, KeyError) as exc:
        console.print(f"[red]error:[/red] {exc.args[0]}")
        raise typer.Exit(2) from exc
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    output = output or Path("runs") / f"validate-{stamp}"
    progress = _Progress(2 * len(suite.tasks), "validate:")
    with progress.progress, sandbox_provider(sandbox, admin_url, allow_internet, _mode(packages)) as provider:
        report = validate_tasks(suite.tasks, suite.errors, output, concurrency, provider, on_trial=progress)
    broken, cannot_run = _print_validation(console, report, tasks_dir, output)
    if broken or cannot_run:
        raise typer.Exit(1 if broken else 3)


def _print_validation(console, report, tasks_dir: Path, output: Path) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """The validation table, then one line per task that is broken or cannot run here; returns how many
    tasks are broken (or malformed) and how many this machine cannot run (exit 1 and 3 respectively)."""
    from rich.markup import escape
    from rich.table import Table

    from rock.sdk.tables import print_table, save_table

    table = Table(title=f"validation of {tasks_dir}")
    for col in ("task", "domain", "difficulty", "oracle", "nop", "verdict"):
        table.add_column(col)
    for row in report.rows:
        verdict = "[green]ok[/green]"
        if row.cannot_run is not None:
            verdict = "[yellow]cannot run here[/yellow]"
        elif not row.ok:
            verdict = "[red]task broken[/red]"
        steps = "".join(f"\n  {s.name}: {s.oracle_reward} / {s.nop_reward}" for s in row.steps)
        table.add_row(
            row.task_id + steps,
            row.category,
            row.difficulty,
            f"{row.oracle_reward:.2f}",
            f"{row.nop_reward:.2f}",
            verdict,
        )
    for error in report.load_errors:
        table.add_row(error.task_dir.name, "-", "-", "-", "-", "[red]malformed[/red]")
    print_table(console, table)
    save_table(table, output / "validation.txt")
    for row in report.rows:
        if not row.ok:
            colour = "yellow" if row.cannot_run is not None else "red"
            console.print(f"[{colour}]{row.task_id}[/{colour}]: {escape(row.problem)}", soft_wrap=True)
    for error in report.load_errors:
        console.print(f"[red]{error.task_dir.name}[/red]: malformed: {escape(str(error))}", soft_wrap=True)
    broken = len(report.broken) + len(report.load_errors)
    ok = sum(r.ok for r in report.rows)
    console.print(
        f"{ok} ok, {broken} violation(s), {len(report.cannot_run)} cannot run here; trials in {output}",
        soft_wrap=True,
    )
    return broken, len(report.cannot_run)


def _mode(packages: Packages | None) -> PackagesMode | None:
    return None if packages is None else packages.value  # type: ignore[return-value]


def _packages_mode(packages: Packages | None, console) -> str:  # type: ignore[no-untyped-def]
    """online or offline as a fleet started now would run the cache (online needs the registries)."""
    from rock.packages.cache import default_folder
    from rock.packages.mode import choose, default_mode

    try:
        choice = choose(_mode(packages) or default_mode(), default_folder())
    except ValueError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
    if choice.fallback:
        console.print(choice.fallback, soft_wrap=True)
    return "offline" if choice.offline else "online"


@app.command()
def check(
    tasks_dir: Annotated[Path, typer.Argument(help="Folder of tasks, or one task folder.")] = DEFAULT_TASKS,
    allow_internet: Annotated[
        bool, typer.Option(help="Judge as if the operator allowed tasks the full network.")
    ] = False,
    output: Annotated[
        Path | None, typer.Option(help="Also write the whole table, at its natural width, to this file.")
    ] = None,
    packages: PackagesOption = None,
) -> None:
    """Before running: each task's layout, base images, network needs at build and test time, features,
    and whether it can run here under the current policy. Exits 1 when a task cannot run here."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from rock.sdk.tables import print_table, save_table
    from rome.bench.check import check_task, image_resolver, seeded_cache

    suite = _load(tasks_dir, None)
    console = Console()
    cache, mode = seeded_cache(), _packages_mode(packages, console)
    resolve = image_resolver()
    checks = [
        check_task(t, resolve, allow_internet, cache is not None or mode == "online") for t in suite.tasks
    ]
    table = Table(title=f"check of {tasks_dir} (package cache: {cache or 'none'}, {mode})", show_lines=True)
    for col in ("task", "layout", "images", "build needs", "test needs", "features", "policy", "here"):
        table.add_column(col)
    for c in checks:
        images = "\n".join(f"{k} -> {v}" for k, v in c.images.items())
        here = "[green]yes[/green]" if c.runnable else f"[red]no[/red]: {escape(c.why)}"
        table.add_row(
            c.task_id,
            c.layout,
            escape(images),
            "\n".join(c.build_needs) or "-",
            "\n".join(c.test_needs) or "-",
            escape("\n".join(c.features)) or "-",
            c.policy,
            here + "".join(f"\n[yellow]{escape(n)}[/yellow]" for n in c.notes),
        )
    print_table(console, table)
    if output is not None:
        console.print(f"full table: {save_table(table, output)}", soft_wrap=True)
    blocked = [c for c in checks if not c.runnable]
    console.print(f"{len(checks) - len(blocked)} of {len(checks)} task(s) can run here", soft_wrap=True)
    if blocked:
        raise typer.Exit(1)


@app.command()
def view(
    run_dir: Annotated[Path, typer.Argument(help="A run folder of `rome-bench terminal-pro`.")],
    out: Annotated[Path | None, typer.Option(help="Folder for the viewer (default RUN_DIR/view).")] = None,
    serve: Annotated[bool, typer.Option("--serve", help="Also serve the folder on 127.0.0.1.")] = False,
    port: Annotated[int, typer.Option(help="Port for --serve (0: any free one).")] = 8765,
) -> None:
    """A bench run as one static HTML folder: pass@k by domain and task, verdicts, trial transcripts."""
    from roll.view.cli import serve_folder
    from roll.view.page import write_page
    from rome.bench.view import BenchViewError, bench_view

    try:
        index = write_page(bench_view(run_dir), out or run_dir / "view")
    except BenchViewError as error:
        typer.echo(f"rome-bench view: {error}", err=True)
        raise typer.Exit(2) from error
    typer.echo(f"Viewer written: {index.resolve()} (open it in a browser; no server needed)")
    if serve:
        serve_folder(index.parent, port)
