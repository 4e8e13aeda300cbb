"""Runs trials (tasks x attempts) with bounded concurrency, writing one JSON per trial; resumable."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from rome.bench.agents import make_agent
from rome.bench.atif import write_trial_trajectory
from rome.bench.trial import TrialResult, run_trial
from rome.terminal_tasks.sandbox import SandboxProvider
from rome.terminal_tasks.task import Task, TaskImageError

if TYPE_CHECKING:
    from rock.packages.mode import PackagesMode
    from rock.sdk import ImageInfo
    from rome.bench.staging import Staging

ProgressHook = Callable[[TrialResult], None]


def trial_path(output: Path, task_id: str, attempt: int) -> Path:
    return output / "trials" / f"{task_id}__{attempt}.json"


def load_finished(output: Path) -> dict[tuple[str, int], TrialResult]:
    """Trials already written under `output`; a partial or unreadable file is run again."""
    done: dict[tuple[str, int], TrialResult] = {}
    for path in sorted((output / "trials").glob("*.json")):
        try:
            trial = TrialResult.model_validate_json(path.read_text())
        except (ValidationError, OSError):
            continue
        done[(trial.task_id, trial.attempt)] = trial
    return done


def write_trial(output: Path, trial: TrialResult) -> None:
    path = trial_path(output, trial.task_id, trial.attempt)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(trial.model_dump_json(indent=2))
    os.replace(tmp, path)
    write_trial_trajectory(output, trial)


SANDBOX_KINDS = ("rock", "docker")


@contextlib.contextmanager
def sandbox_provider(
    kind: str = "rock",
    admin_url: str | None = None,
    allow_internet: bool = False,
    packages: PackagesMode | None = None,
) -> Iterator[SandboxProvider]:
    """Sandboxes for a run: ROCK (a private local fleet unless `admin_url` names one) or plain Docker.

    The private fleet runs the package cache ($ALE_HOME/package-cache, seeded by set-up) as `packages` says
    (rock.packages.mode: online by default, offline when the registries cannot be reached); offline it
    serves what was seeded from its own copy; it builds task images from copies of their folders
    (rome.bench.staging). A fleet at `admin_url` builds them where they are, so they must lie under its
    build roots. `allow_internet` is the operator's consent to `full`.
    """
    if kind == "docker":
        from rome.bench.docker_sandbox import DockerProvider

        yield DockerProvider(allow_internet)
        return
    if kind != "rock":
        raise ValueError(f"unknown sandbox kind {kind!r}; choose one of {', '.join(SANDBOX_KINDS)}")
    if admin_url:
        yield grouped_rock_provider(admin_url, allow_internet)
        return
    from rock.fleet import LocalFleet, short_tmp
    from rock.packages.mode import default_mode, fleet_admin_args
    from rome.bench.staging import Staging

    state_dir = short_tmp("rock-fleet-")
    staging = Staging(state_dir / "contexts")
    admin_args = [*fleet_admin_args(packages or default_mode()), "--build-context-root", str(staging.root)]
    with LocalFleet(state_dir, stop_with_parent=True, admin_args=admin_args) as fleet:
        yield grouped_rock_provider(fleet.url, allow_internet, staging)


def grouped_rock_provider(
    admin_url: str | None, allow_internet: bool, staging: Staging | None = None
) -> SandboxProvider:
    """A `RockProvider` whose trials that start together (a task's attempts, in the run's order) get their
    sandboxes from one group create. With `staging` (a private fleet's), task folders are built from copies
    in the fleet's staging root; without, they must lie under one of the fleet's build roots."""
    from rock.sdk.grouping import GroupedOpens
    from rome.terminal_tasks.rock_sandbox import RockProvider, RockSandbox

    class Grouped(RockProvider):
        def __init__(self) -> None:
            super().__init__(admin_url, allow_internet)
            self.opens = GroupedOpens()

        def image(self, task: Task) -> ImageInfo:
            if staging is None:
                return super().image(task)
            with staging.lock(task):
                return super().image(staging.stage(task))

        def open(self, image: ImageInfo, task: Task) -> RockSandbox:
            return RockSandbox(
                image, task, self.admin_url, self.allow_internet, self.package_cache, self.opens.open
            )

    return Grouped()


@dataclass(frozen=True)
class BuildOutcome:
    image: ImageInfo | None
    error: str | None
    seconds: float


def build_all(tasks: list[Task], workers: int, provider: SandboxProvider) -> dict[str, BuildOutcome]:
    """Build each task's image once where `provider` runs sandboxes (cached by content); a failed build is
    recorded, not raised."""

    def build(task: Task) -> BuildOutcome:
        t0 = time.monotonic()
        try:
            return BuildOutcome(provider.image(task), None, time.monotonic() - t0)
        except TaskImageError as exc:
            return BuildOutcome(None, str(exc), time.monotonic() - t0)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        outcomes = dict(zip([t.id for t in tasks], pool.map(build, tasks), strict=True))
    return outcomes


def run_trials(
    tasks: list[Task],
    agent_name: str,
    output: Path,
    n_attempts: int = 1,
    concurrency: int = 1,
    model: str | None = None,
    provider: SandboxProvider | None = None,
    on_trial: ProgressHook | None = None,
    built: Mapping[str, BuildOutcome] | None = None,
) -> list[TrialResult]:
    """Run every (task, attempt) not already finished under `output`; return all trials, old and new. A
    trial this machine could not judge (infra_error: no verdict on the task) counts as not finished, so a
    rerun retries it. `built`: `build_all`'s answer for some of the tasks on this provider, whose images are
    then not asked for again (a validation's three passes over one task set)."""
    output.mkdir(parents=True, exist_ok=True)
    finished = {key: t for key, t in load_finished(output).items() if t.verdict != "infra_error"}
    pending = [(t, a) for t in tasks for a in range(n_attempts) if (t.id, a) not in finished]
    results = [finished[(t.id, a)] for t in tasks for a in range(n_attempts) if (t.id, a) in finished]
    for trial in results:
        if on_trial:
            on_trial(trial)
    if not pending:
        return results
    needed = list({t.id: t for t, _ in pending}.values())
    agent = make_agent(agent_name, model=model)
    # The build time is charged to the first pending attempt of a task, the one that waited for it.
    first_attempt: dict[str, int] = {}
    for task, attempt in pending:
        first_attempt.setdefault(task.id, attempt)

    def one(task: Task, attempt: int, sandboxes: SandboxProvider) -> TrialResult:
        build = builds.get(task.id) or known[task.id]
        build_sec = build.seconds if task.id in builds and first_attempt[task.id] == attempt else 0.0
        artifacts = trial_path(output, task.id, attempt).with_suffix("") / "artifacts"
        trial = run_trial(
            task, attempt, agent, sandboxes, build.image, build.error, build_sec, model, artifacts
        )
        write_trial(output, trial)
        return trial

    with contextlib.ExitStack() as stack:
        sandboxes = provider or stack.enter_context(sandbox_provider())
        known = built or {}
        missing = [t for t in needed if t.id not in known]
        builds = build_all(missing, workers=min(concurrency, 2), provider=sandboxes) if missing else {}
        with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            futures = [pool.submit(one, t, a, sandboxes) for t, a in pending]
            for future in as_completed(futures):
                trial = future.result()
                results.append(trial)
                if on_trial:
                    on_trial(trial)
    results.sort(key=lambda r: (r.task_id, r.attempt))
    return results


def write_run_config(output: Path, config: dict) -> None:
    (output / "run.json").write_text(json.dumps(config, indent=2, default=str))
