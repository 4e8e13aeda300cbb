"""The driver's side of a terminal env (its `EnvRun`): the ROCK fleet and the task images it builds once, the
start-point scheduler and the sandbox ledger.

The ledger keeps which sandboxes each rollout worker holds, so none outlives a worker that died mid-episode:
a worker's episodes open their sandboxes through a `LedgerProvider`, which notes every sandbox they open and
close in the `SandboxLedger` (a Ray actor of the driver's); when the driver finds a worker dead, it deletes
the sandboxes still listed under it through the ROCK admin (`delete_sandboxes`), and its episodes are sampled
again elsewhere.

The fleet is a private local one (`rock.sdk.private_fleet.PrivateFleet`: processes of its own, stopped with
every sandbox it made when the run ends or its driver dies) unless env.rock.admin_url names a running admin.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx
import ray

from rock.sdk import ImageInfo, Sandbox
from rock.sdk.grouping import FleetCounters, GroupedOpens, fleet_counters
from roll.rollout.episode import EpisodeTask
from roll.rollout.terminal.config import TerminalEnvConfig
from roll.rollout.terminal.evaluation import eval_tasks, held_out_tasks
from roll.rollout.terminal.resampling.start_points import StartPoints
from roll.rollout.terminal.tasks import TerminalTasksError, load_terminal_tasks, oracle_experts
from rome.terminal_tasks.rock_sandbox import RockSandbox, ensure_image
from rome.terminal_tasks.task import Task, TaskImageError

if TYPE_CHECKING:
    from roll.rollout.env_kind import RunSettings

log = logging.getLogger(__name__)


class SandboxLedger:
    """Open sandboxes by worker id (a plain class; the cluster runs it as a Ray actor)."""

    def __init__(self) -> None:
        self._open: dict[str, set[str]] = {}

    def opened(self, worker_id: str, sandbox_id: str) -> None:
        self._open.setdefault(worker_id, set()).add(sandbox_id)

    def closed(self, worker_id: str, sandbox_id: str) -> None:
        self._open.get(worker_id, set()).discard(sandbox_id)

    def take(self, worker_id: str) -> list[str]:
        """The sandboxes a (dead) worker still holds; they are no longer listed afterwards."""
        return sorted(self._open.pop(worker_id, set()))

    def held(self) -> dict[str, list[str]]:
        return {worker: sorted(ids) for worker, ids in self._open.items() if ids}


def delete_sandboxes(sandbox_ids: list[str], admin_url: str) -> int:
    """Delete the sandboxes on the fleet at `admin_url`; returns how many were still there."""
    from rock.sdk import RockError, Sandbox

    deleted = 0
    for sandbox_id in sandbox_ids:
        try:
            Sandbox.attach(sandbox_id, admin_url=admin_url).close()
            deleted += 1
        except RockError as error:  # already gone (the episode closed it as the worker died)
            log.info("sandbox %s of a dead worker was already gone: %s", sandbox_id, error)
    return deleted


class LedgerSandbox(RockSandbox):
    """A ROCK sandbox of a trial that notes its life in the ledger."""

    def __init__(
        self,
        image: ImageInfo,
        task: Task,
        admin_url: str,
        ledger: Any,
        worker_id: str,
        open_sandbox: Callable[..., Sandbox] = Sandbox,
    ) -> None:
        super().__init__(image, task, admin_url, open_sandbox=open_sandbox)
        self._ledger, self._worker_id = ledger, worker_id
        ray.get(ledger.opened.remote(worker_id, self.rock.id))

    def close(self) -> None:
        super().close()
        with contextlib.suppress(ray.exceptions.RayError):  # the driver is going away: nothing to note
            ray.get(self._ledger.closed.remote(self._worker_id, self.rock.id))


class LedgerProvider:
    """rome-bench's `SandboxProvider` for the trials of one rollout worker. The episodes of a group start
    together (the worker's episode loops take a group's members one after another): their sandboxes come
    from one group create (`GroupedOpens`)."""

    name = "rock"

    def __init__(self, admin_url: str, ledger: Any, worker_id: str) -> None:
        self.admin_url, self.ledger, self.worker_id = admin_url, ledger, worker_id
        self.opens = GroupedOpens()

    def image(self, task: Task) -> ImageInfo:
        """The task's image on the run's fleet (built there when the run started; this finds it built)."""
        return ensure_image(task, self.admin_url)

    def open(self, image: ImageInfo, task: Task) -> LedgerSandbox:
        return LedgerSandbox(image, task, self.admin_url, self.ledger, self.worker_id, self.opens.open)


def build_task_images(tasks: list[Task], admin_url: str) -> None:
    """Every task's image, built by the fleet at `admin_url` once here, so rollout workers find them built
    and never build one at the same time. The tasks folder must be one of the fleet's build roots (a private
    fleet is started with it; an operator's fleet: `rock admin serve --build-context-root`)."""
    for task in tasks:
        try:
            ensure_image(task, admin_url)
        except TaskImageError as error:
            raise TerminalTasksError(
                f"{error}; fix the task's Dockerfile or leave it out of env.task_ids"
            ) from error


@dataclass(frozen=True)
class TerminalServices:
    """What terminal episodes share across workers: the fleet, the start-point scheduler, the sandbox
    ledger (Ray actor handles), and the name the model is served under."""

    admin_url: str
    start_points: Any
    ledger: Any
    model_id: str


class TerminalRun:
    def __init__(self, config: RunSettings, start_points: dict[str, Any] | None) -> None:
        """`start_points`: the scheduler's state at the checkpoint a resumed run continues from (None: a
        fresh run)."""
        env: TerminalEnvConfig = config.env
        self.env = env
        self.fleet = None
        admin_url = env.rock.admin_url
        if admin_url is None:
            from rock.sdk.private_fleet import PrivateFleet

            # A driver killed without cleaning up still takes the fleet and its sandboxes with it. The fleet
            # builds the task images from the tasks folder (and the base images when it starts).
            self.fleet = PrivateFleet(
                slots=env.rock.slots, packages=env.rock.packages, build_roots=[env.tasks_dir]
            ).__enter__()
            admin_url = self.fleet.url
        self.admin_url = admin_url
        try:
            build_task_images(load_terminal_tasks(env) + load_terminal_tasks(env, held_out=True), admin_url)
        except BaseException:
            if self.fleet is not None:
                self.fleet.close()
            raise
        self.start_points = (
            ray.remote(StartPoints)
            .options(num_cpus=0)
            .remote(env, config.run_dir.resolve() / "experts", start_points)
        )
        self.ledger = ray.remote(SandboxLedger).options(num_cpus=0).remote()
        self.services = TerminalServices(admin_url, self.start_points, self.ledger, config.trainer.model)
        experts = oracle_experts(load_terminal_tasks(env))
        self.oracle_lengths = {task_id: len(steps) for task_id, steps in experts.items()}
        self._counters = self._fleet_counters()

    def describe(self) -> list[str]:
        return ray.get(self.start_points.describe.remote())

    def worker_lost(self, worker_id: str) -> int:
        """Delete the sandboxes a dead (or stopped) worker still held; returns how many were still there."""
        held = ray.get(self.ledger.take.remote(worker_id))
        deleted = delete_sandboxes(held, self.admin_url)
        if held:
            log.warning("rollout worker %s left %d sandboxes; %d deleted", worker_id, len(held), deleted)
        return deleted

    def eval_tasks(self, episodes: int, seed_offset: int) -> list[EpisodeTask]:
        """The held-out tasks from scratch when the run has any, else every start point of every train task
        (`seed_offset` is 0: TrainConfig refuses another for a terminal env)."""
        if self.env.held_out_task_ids:
            return held_out_tasks(self.env.held_out_task_ids, episodes)
        return eval_tasks(self.oracle_lengths, episodes)

    def state(self) -> dict[str, Any]:
        """The checkpoint's part of the run: the start-point scheduler's state."""
        return {"start_points": ray.get(self.start_points.state.remote())}

    def metrics(self) -> dict[str, float]:
        return {**ray.get(self.start_points.metrics.remote()), **self._fleet_metrics()}

    def _fleet_counters(self) -> FleetCounters | None:
        try:
            return fleet_counters(self.admin_url)
        except httpx.HTTPError as error:  # an external admin that keeps /metrics from this key
            log.warning("the fleet's /metrics did not answer (%s): step records go without fleet/", error)
            return None

    def _fleet_metrics(self) -> dict[str, float]:
        """How the sandboxes since the last step record were made, by the admin's own counters: a group's
        episodes start together and share one group create (rock.sdk.grouping)."""
        if self._counters is None:
            return {}
        now = self._fleet_counters()
        if now is None:
            return {}
        step, self._counters = now.since(self._counters), now
        made = {"fleet/sandboxes": step.sandboxes, "fleet/group_creates": step.group_creates}
        if step.group_creates:
            made["fleet/sandboxes_per_group_create"] = step.group_members / step.group_creates
        return made

    def close(self) -> None:
        """After the rollout workers were stopped: delete what they still held, then stop the fleet."""
        for worker_id in ray.get(self.ledger.held.remote()):
            self.worker_lost(worker_id)
        for handle in (self.start_points, self.ledger):
            ray.kill(handle)
        if self.fleet is not None:
            self.fleet.close()
