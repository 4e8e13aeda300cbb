"""Which project files run on the path from `roll train` to an optimizer step; any loopback server it opens.

Runs a real `roll train` of a terminal recipe (default configs/ipa.yaml, agent on the host) for one step under
coverage.py in every Python process it starts: the driver, its Ray actors (trainer, engine, rollout worker,
buffer, start points, ledger), the private ROCK fleet (`rock admin serve` and its worker) and the data stage's
`rome data prepare` child. Every process inherits COVERAGE_PROCESS_START (coverage's own .pth starts
measuring at interpreter start, or else the hook does) and a sitecustomize.py from a temp dir on PYTHONPATH
that
- saves the process's data every second, since Ray ends actors with SIGKILL (ray.kill), which runs no atexit;
- switches the coverage context from "" to "after_step" once the driver has written the first step record
  (runs/<name>/metrics.jsonl, written after the optimizer step and its weight sync), so a file counts as on
  the path to the step when a line of it ran before that;
- records every process's titles (Ray renames actor processes `ray::<Actor>.<method>`) to name its role;
- wraps socket.socket.listen and records each listening socket opened from Python: process, address and the
  project frames that opened it.
- profiles every Python call (sys.setprofile, threading.setprofile) and, until the step record, writes down
  the project frames on the stack each time project code calls out of the project: into a torch module (the
  model) or backward, the optimizer, HTTP (httpx), the Docker SDK, Ray (remote calls, get, put, wait) or a
  child process (subprocess), each distinct stack once; and where it hands work to another thread or asyncio
  task (create_task, run_coroutine_threadsafe, an executor's submit, Thread.start), since a stack starts
  afresh there and the chain a reader follows goes on in the new one.

What is counted: distinct files under roll/, rock/, iflow/, rome/ with at least one line executed, grouped by
package: `total` (everything the run executed, the step's checkpoint, final export and shutdown included) and
`path` (before the first step record, in every process but the data stage's child, which is reported apart
as `data_stage`; the driver's own data-stage module is counted in `path`), with how many of those had a
line of a function body run (the others were only imported: module and class bodies), and `path` in the
driver and its Ray actors alone (the fleet's processes left out). Run with
`warm_start=null` (the default overrides) so no SFT child runs, and `eval.episodes=0` so no evaluation
does. "Loopback servers" lists the sockets opened by project code in the driver or a Ray actor
(`episode_path_servers`: the model path would show here, e.g. an HTTP proxy or an engine's OpenAI server)
apart from the fleet's own control plane (`fleet_servers`: admin and worker, a process boundary) and Ray's
(no project frame). "On the call stacks" counts the files with a function on one of those stacks: the chains
of calls that lead from `roll train` and each actor's and fleet process's entry to the work an episode and a
step do outside the project, which is what a reader follows to trace an episode; a file whose code ran but
was never on such a chain (config models, helpers that returned before the call out) is left out of it.
Not measured: code inside sandbox containers (the rocklet runs there from a mounted
runtime without this environment), and threads created by C++ (coverage on Python 3.11 traces only threads
started from Python).

    nice -n 19 .venv/bin/python benchmarks/episode_path.py [--config configs/ipa.yaml]
        [--model runs/learning/sft-s0/model] [--keep] [--timeout 3600] [-- extra key=value overrides]
    nice -n 19 .venv/bin/python benchmarks/episode_path.py --report /tmp/episode-path-XXXX  # a kept run again

Prints the files per package, the ten files with the most executed lines, the servers, and a final JSON line.
Needs coverage (the dev extra), Docker and the terminal recipe's cached dataset (.ale/datasets).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("roll", "rock", "iflow", "rome")
AFTER = "after_step"

# Copied into every process as sitecustomize.py (a file beside this one).
HOOK = (Path(__file__).parent / "episode_path_hook.py").read_text()


def write_setup(work: Path) -> dict[str, str]:
    """The coverage rc, the hook and the environment every process of the run inherits."""
    (work / "roles").mkdir()
    (work / "data").mkdir()
    (work / "hook").mkdir()
    (work / "stacks").mkdir()
    (work / "hook" / "sitecustomize.py").write_text(HOOK)
    # `include`, not `source`: with source, every save also records each unexecuted file of the packages.
    include = "\n".join(f"    {ROOT / p}/*" for p in PACKAGES)
    rc = work / "coveragerc"
    rc.write_text(
        textwrap.dedent(f"""\
        [run]
        parallel = true
        sigterm = true
        data_file = {work / "data" / ".coverage"}
        include =
        """)
        + include
        + "\n"
    )
    env = dict(os.environ)
    env["COVERAGE_PROCESS_START"] = str(rc)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(work / "hook"), env.get("PYTHONPATH", "")) if p)
    env["EPISODE_PATH_DIR"] = str(work)
    env["EPISODE_PATH_AFTER"] = AFTER
    env["EPISODE_PATH_ROOT"] = str(ROOT)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_train(command: list[str], env: dict[str, str], log: Path, timeout: float) -> int:
    """The run in its own session, its output to `log` (its last lines shown on failure)."""
    with log.open("w") as out:
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            return process.wait(timeout=timeout)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            return -1


def stop_leftovers(run_dir: Path) -> int:
    """The run's Ray processes still alive after the driver ended (its record names their temp dir)."""
    from roll.pipeline.ray_session import RECORD, stop_previous

    if not (run_dir / RECORD).is_file():
        return 0
    return stop_previous(run_dir)


def role(titles: list[str]) -> str:
    """A process's role from the titles it had."""
    joined = " ".join(titles)
    actors = sorted(
        {m.group(1) for t in titles if (m := re.match(r"ray::(\w+)", t)) and m.group(1) not in {"IDLE"}}
    )
    if actors:
        return "ray::" + "+".join(actors)
    for needle, name in (
        ("roll.cli train", "driver"),
        ("roll.cli sft", "sft"),
        ("data prepare", "data_stage"),
        ("rock.cli fleet", "fleet"),
        ("-m rock.fleet", "fleet"),  # the fleet's watchdog
        ("rock.cli admin", "fleet"),
        ("rock.cli worker", "fleet"),
        ("devpi-server", "fleet"),  # the fleet's package cache
        ("rock.cli", "rock"),
    ):
        if needle in joined:
            return name
    return "ray worker (no actor)" if "default_worker.py" in joined else (titles[0][:60] if titles else "?")


Lines = dict[str, dict[str, set[int]]]  # process role -> project file -> executed line numbers


def read_data(work: Path) -> tuple[Lines, Lines]:
    """Per process role, each project file's executed lines: over the whole run, and before the step."""
    from coverage import CoverageData

    titles: dict[int, list[str]] = {
        int(p.stem): json.loads(p.read_text()) for p in (work / "roles").glob("*.json")
    }
    total: Lines = defaultdict(lambda: defaultdict(set))
    before: Lines = defaultdict(lambda: defaultdict(set))
    for path in sorted((work / "data").glob(".coverage.*")):
        pid = int(re.search(r"\.pid(\d+)\.", path.name).group(1))  # .coverage.<host>.pid<pid>.<random>...
        name = role(titles.get(pid, []))
        data = CoverageData(basename=str(path))
        data.read()
        for file in data.measured_files():
            rel = os.path.relpath(file, ROOT)
            for line, contexts in data.contexts_by_lineno(file).items():
                total[name][rel].add(line)
                if any(c != AFTER for c in contexts):
                    before[name][rel].add(line)
    return total, before


def read_stacks(work: Path) -> dict[str, dict[str, set[str]]]:
    """Per kind of crossing, the project files on its call stacks, per process role (the data stage's and
    SFT's children left out)."""
    titles: dict[int, list[str]] = {
        int(p.stem): json.loads(p.read_text()) for p in (work / "roles").glob("*.json")
    }
    files: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for path in sorted((work / "stacks").glob("*.jsonl")):
        name = role(titles.get(int(path.stem), []))
        if name in {"data_stage", "sft"}:
            continue
        for line in path.read_text().splitlines():
            record = json.loads(line)
            files[record["kind"]][name] |= {frame.split(":")[0] for frame in record["stack"]}
    return files


def function_lines(rel: str) -> set[int]:
    """The lines of a file's function bodies: a file with none of them executed was only imported (its
    module and class bodies ran: definitions, constants), none of its functions was called."""
    tree = ast.parse((ROOT / rel).read_text())
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines.update(range(node.body[0].lineno, (node.end_lineno or node.body[0].lineno) + 1))
    return lines


def union(by_role: Lines, roles: set[str] | None = None) -> dict[str, set[int]]:
    """Executed lines per file over the processes of `roles` (None: all)."""
    merged: dict[str, set[int]] = defaultdict(set)
    for name, files in by_role.items():
        if roles is None or name in roles:
            for f, numbers in files.items():
                merged[f] |= numbers
    return {f: numbers for f, numbers in merged.items() if numbers}


def combine(work: Path) -> Path:
    """All processes' data in one file, for `coverage report --data-file=...`."""
    import coverage

    cov = coverage.Coverage(data_file=str(work / "combined.coverage"), config_file=str(work / "coveragerc"))
    # Files named one by one: given a folder, combine reads only the files named after its own data file.
    cov.combine([str(p) for p in sorted((work / "data").glob(".coverage.*"))], keep=True)
    cov.save()
    return work / "combined.coverage"


def by_package(files: set[str]) -> dict[str, int]:
    counts = Counter(f.split(os.sep)[0] for f in files)
    return {p: counts.get(p, 0) for p in PACKAGES}


def servers(work: Path) -> tuple[list[dict], list[dict], int]:
    """Listening sockets: the fleet's, those opened from project code elsewhere, how many others (Ray's)."""
    path = work / "listens.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []
    episode, fleet, infra = [], [], 0
    for r in records:
        process = role([r["title"]])
        entry = {"process": process, "address": r["address"], "opened_at": (r["frames"] or ["-"])[-1]}
        if process == "fleet":
            fleet.append(entry)
        elif r["frames"]:
            episode.append(entry)
        else:
            infra += 1
    return episode, fleet, infra


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="configs/ipa.yaml")
    parser.add_argument("--model", default="runs/learning/sft-s0/model", help="trainer.model")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds before the run is stopped")
    parser.add_argument(
        "--keep", action="store_true", help="keep the temp dir (coverage data, log, run logs)"
    )
    parser.add_argument("--report", type=Path, help="no run: report on the temp dir a --keep run left")
    parser.add_argument("overrides", nargs="*", help="more key=value overrides of the config")
    args = parser.parse_args()
    if args.report:
        report(args.report, {})
        return

    work = Path(tempfile.mkdtemp(prefix="episode-path-"))
    run_dir = work / "run"
    env = write_setup(work)
    env["EPISODE_PATH_MARK"] = str(run_dir / "metrics.jsonl")
    overrides = [
        "name=episode-path",
        f"output_dir={run_dir}",
        "steps=1",
        "save_every=0",
        "warm_start=null",
        f"trainer.model={args.model}",
        "eval.episodes=0",
        *args.overrides,
    ]
    command = [sys.executable, "-m", "roll.cli", "train", args.config, *overrides]
    print("running:", " ".join(command), f"(log: {work / 'train.log'})", flush=True)
    started = time.perf_counter()
    try:
        code = run_train(command, env, work / "train.log", args.timeout)
    finally:
        stopped = stop_leftovers(run_dir)
    wall = time.perf_counter() - started
    time.sleep(2.0)  # the last saves of processes ending now
    if code != 0 or not (run_dir / "metrics.jsonl").is_file():
        tail = (work / "train.log").read_text(errors="replace").splitlines()[-40:]
        sys.exit(
            f"roll train ended with status {code} before a step record; its log ({work}/train.log) ends:\n"
            + "\n".join(tail)
        )
    combined = combine(work)
    report(work, {"ray_leftovers_stopped": stopped, "wall_s": round(wall, 1)})
    if args.keep:
        for weights in (
            "model",
            "checkpoints",
        ):  # the run's exported model and last checkpoint: GBs, not needed
            shutil.rmtree(run_dir / weights, ignore_errors=True)
        print(f"kept: {work} (coverage report --data-file={combined}; this report again: --report {work})")
    else:
        shutil.rmtree(work, ignore_errors=True)


def report(work: Path, extra: dict[str, object]) -> None:
    """The files per process and package, the biggest ones, the servers, and the JSON line."""
    total, before = read_data(work)
    everything = union(total)
    path = union(before, {name for name in before if name not in {"data_stage", "sft"}})
    stage = union(total, {"data_stage"})
    called = {f for f, numbers in path.items() if numbers & function_lines(f)}
    # The driver and its Ray actors, without the fleet's processes (a service the run starts and calls).
    train = union(before, {name for name in before if name == "driver" or name.startswith("ray::")})
    episode, fleet, infra = servers(work)

    print(f"{'process':40s} {'files (whole run)':>18s} {'before the step':>16s}")
    for name in sorted(total):
        print(f"{name:40s} {len(union(total, {name})):18d} {len(union(before, {name})):16d}")
    print(f"\npath to the optimizer step: {len(path)} files {by_package(set(path))}")
    print(f"  a function ran in {len(called)} {by_package(called)}; only imported: {len(path) - len(called)}")
    print(f"  in the driver and its Ray actors (no fleet process): {len(train)} {by_package(set(train))}")
    for package in PACKAGES:
        names = sorted(f for f in path if f.split(os.sep)[0] == package)
        shown = [n.removeprefix(package + os.sep) + ("" if n in called else " (import)") for n in names]
        print(f"  {package} ({len(names)}): " + ", ".join(shown))
    later = set(everything) - set(path) - set(stage)
    print(f"only after the step (checkpoint, export, shutdown): {len(later)}: " + ", ".join(sorted(later)))
    print(f"data stage child (rome data prepare): {len(stage)} files {by_package(set(stage))}")
    stacks = read_stacks(work)
    on_stacks = {f for by_role in stacks.values() for named in by_role.values() for f in named}
    train_stacks = {
        f
        for by_role in stacks.values()
        for name, named in by_role.items()
        if name == "driver" or name.startswith("ray::")
        for f in named
    }
    print(f"\non the call stacks where project code calls out (before the step): {len(on_stacks)} files")
    print(f"  {by_package(on_stacks)}")
    print(f"  in the driver and its Ray actors: {len(train_stacks)} {by_package(train_stacks)}")
    for kind in sorted(stacks):
        named = {f for by_role in stacks[kind].values() for f in by_role}
        processes = ", ".join(sorted(stacks[kind]))
        print(f"  into {kind} ({len(named)}, from {processes}): {', '.join(sorted(named))}")
    print("\nthe ten files on the path with the most executed lines (executed / lines in the file):")
    for f in sorted(path, key=lambda f: -len(path[f]))[:10]:
        print(f"  {len(path[f]):5d} / {len((ROOT / f).read_text().splitlines()):5d}  {f}")
    print(f"\nlistening sockets opened by project code in the driver or a Ray actor: {episode or 'none'}")
    print(
        f"fleet (rock admin + local worker, package cache): {[(e['address'], e['opened_at']) for e in fleet]}"
    )
    print(f"opened elsewhere with no project frame (Ray's own): {infra}")
    summary = {
        "path_files": len(path),
        "path_by_package": by_package(set(path)),
        "path_files_called": len(called),
        "path_called_by_package": by_package(called),
        "call_stack_files": len(on_stacks),
        "call_stack_by_package": by_package(on_stacks),
        "call_stack_files_driver_and_actors": len(train_stacks),
        "call_stack_driver_and_actors_by_package": by_package(train_stacks),
        "path_files_driver_and_actors": len(train),
        "path_driver_and_actors_by_package": by_package(set(train)),
        "total_files": len(everything),
        "total_by_package": by_package(set(everything)),
        "data_stage_files": len(stage),
        "processes": {name: len(union(total, {name})) for name in sorted(total)},
        "episode_path_servers": episode,
        "fleet_servers": len(fleet),
        **extra,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
