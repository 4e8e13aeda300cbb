"""The driver's side of a terminal env: the ROCK fleet, the start-point scheduler and the sandbox ledger.

The fleet is a private local one (`rock admin serve` in a process of its own, stopped with every sandbox
it made when the run ends or its driver dies) unless env.rock.admin_url names a running admin.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import ray

from roll.rollout.terminal.config import TerminalEnvConfig
from roll.rollout.terminal.sandboxes import SandboxLedger, delete_sandboxes
from roll.rollout.terminal.start_points import StartPoints
from roll.rollout.terminal.tasks import load_terminal_tasks, oracle_experts
from roll.rollout.worker import TerminalServices

if TYPE_CHECKING:
    from roll.pipeline.config import TrainConfig

log = logging.getLogger(__name__)


class TerminalRun:
    def __init__(self, config: TrainConfig, start_points: dict[str, Any] | None) -> None:
        assert isinstance(config.env, TerminalEnvConfig)
        env = config.env
        self.fleet = None
        admin_url = env.rock.admin_url
        if admin_url is None:
            from rock.fleet import LocalFleet
            from rock.packages.mode import default_mode, fleet_admin_args

            packages = fleet_admin_args(env.rock.packages or default_mode())
            # stop_with_parent: a driver killed without cleaning up still takes its sandboxes with it.
            self.fleet = LocalFleet(
                slots=env.rock.slots, stop_with_parent=True, admin_args=packages
            ).__enter__()
            admin_url = self.fleet.url
        self.admin_url = admin_url
        self.start_points = (
            ray.remote(StartPoints)
            .options(num_cpus=0)
            .remote(env, config.run_dir.resolve() / "experts", start_points)
        )
        self.ledger = ray.remote(SandboxLedger).options(num_cpus=0).remote()
        self.services = TerminalServices(admin_url, self.start_points, self.ledger, config.trainer.model)
        experts = oracle_experts(load_terminal_tasks(env))
        self.oracle_lengths = {task_id: len(steps) for task_id, steps in experts.items()}

    def describe(self) -> list[str]:
        return ray.get(self.start_points.describe.remote())

    def worker_lost(self, worker_id: str) -> int:
        """Delete the sandboxes a dead (or stopped) worker still held; returns how many were still there."""
        held = ray.get(self.ledger.take.remote(worker_id))
        deleted = delete_sandboxes(held, self.admin_url)
        if held:
            log.warning("rollout worker %s left %d sandboxes; %d deleted", worker_id, len(held), deleted)
        return deleted

    def state(self) -> dict[str, Any]:
        return ray.get(self.start_points.state.remote())

    def metrics(self) -> dict[str, float]:
        return ray.get(self.start_points.metrics.remote())

    def close(self) -> None:
        """After the rollout workers were stopped: delete what they still held, then stop the fleet."""
        for worker_id in ray.get(self.ledger.held.remote()):
            self.worker_lost(worker_id)
        for handle in (self.start_points, self.ledger):
            ray.kill(handle)
        if self.fleet is not None:
            self.fleet.__exit__(None, None, None)
