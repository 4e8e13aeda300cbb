"""The roles on Ray: a trainer group, an engine group, rollout workers and the sample buffer.

Each role declares its resources (CPUs, GPUs) to Ray; on one machine they share the CPU, on a cluster Ray
places them on their own devices. The driver holds the handles and is the controller.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import ray

from roll.pipeline.actors import EngineActor
from roll.pipeline.buffer import SampleBuffer
from roll.pipeline.config import TrainConfig
from roll.pipeline.tracking import RunLog
from roll.pipeline.trainer_group import TrainerGroup
from roll.pipeline.weight_sync import make_weight_sync
from roll.rollout.envs import env_kind
from roll.rollout.episode import EpisodeTask
from roll.rollout.worker import RolloutWorker
from roll.types import Trajectory

log = logging.getLogger(__name__)

WATCH_INTERVAL_S = 1.0
WORKER_REPLACEMENTS_PER_WORKER = 3


class PipelineError(RuntimeError):
    """The pipeline cannot go on; the message says which role failed and why."""


class EngineGroup:
    """The inference engines; weights go to all of them, multiplexing puts some to sleep."""

    def __init__(self, handles: list[Any], weight_sync: str) -> None:
        self.handles = handles
        self.weight_sync = weight_sync
        self.asleep: set[int] = set()
        self.sleep_s = 0.0

    @property
    def awake(self) -> list[int]:
        return [i for i in range(len(self.handles)) if i not in self.asleep]

    @property
    def names(self) -> list[str]:
        return [f"engine {index}" for index in range(len(self.handles))]

    def shrink(self, keep: int) -> list[int]:
        """Sleep all but `keep` engines (their devices go to the trainer); returns those put to sleep."""
        tick = time.perf_counter()
        to_sleep = self.awake[keep:]
        ray.get([self.handles[i].sleep.remote() for i in to_sleep])
        self.asleep.update(to_sleep)
        self.sleep_s += time.perf_counter() - tick
        return to_sleep

    def expand(self) -> None:
        tick = time.perf_counter()
        ray.get([self.handles[i].wake.remote() for i in self.asleep])
        self.asleep.clear()
        self.sleep_s += time.perf_counter() - tick

    def stats(self) -> list[dict[str, Any]]:
        return [s.model_dump() for s in ray.get([h.stats.remote() for h in self.handles])]


class Cluster:
    def __init__(
        self,
        config: TrainConfig,
        policy_model: str,
        step: int,
        next_group: int,
        resume: dict[str, Any] | None = None,
    ) -> None:
        """`resume`: the checkpoint record a resumed run continues from (None: a fresh run); the env kind's
        run takes its state from it."""
        check_resources(config)
        self.config = config
        res = config.resources
        trainer_config = config.trainer.model_copy(update={"model": policy_model})
        self.trainer = TrainerGroup(trainer_config, config.loss, res)
        engine_actor = ray.remote(EngineActor).options(num_cpus=res.engine_cpus, num_gpus=res.engine_gpus)
        self.engines = EngineGroup(
            [
                engine_actor.remote(
                    config.trainer.model,
                    config.engines.engine,
                    res.engine_threads,
                    base_gpu_id(config, index),
                )
                for index in range(config.engines.num_engines)
            ],
            config.engines.weight_sync,
        )
        ray.get([h.start.remote() for h in self.engines.handles])
        self.trainer.ready()
        self.weight_sync = make_weight_sync(config, self.trainer, self.engines)
        rollout = config.rollout
        self.buffer = (
            ray.remote(SampleBuffer)
            .options(num_cpus=0)
            .remote(
                rollout.group_size,
                rollout.groups_per_step,
                config.async_ratio,
                rollout.max_attempts,
                config.train_seed_offset,
                step,
                next_group,
                rollout.drop_uniform_groups,
                config.reward.source,
                config.steps,
            )
        )
        from roll.models import resolve_model_path

        self._tokenizer_path = str(resolve_model_path(config.trainer.model))
        self.env_run = env_kind(config.env.type).start(config, resume)
        self.workers: dict[str, Any] = {}
        self._runs: dict[ray.ObjectRef, str] = {}
        self._worker_count = 0
        self.workers_lost = 0
        for _ in range(rollout.num_workers):
            self._start_worker()

    def _start_worker(self) -> None:
        worker_id = f"w{self._worker_count}"
        self._worker_count += 1
        rollout = self.config.rollout
        handle = (
            ray.remote(RolloutWorker)
            .options(num_cpus=0, name=None)
            .remote(
                worker_id,
                self._tokenizer_path,
                self.config.env,
                rollout.sampling,
                rollout.episodes_in_flight,
                self.engines.handles,
                self.buffer,
                self.env_run.services,
            )
        )
        self.workers[worker_id] = handle
        self._runs[handle.run.remote()] = worker_id

    def _replace_dead_workers(self, finished: list[ray.ObjectRef]) -> None:
        for ref in finished:
            worker_id = self._runs.pop(ref)
            try:
                ray.get(ref)
                continue  # it ended because the buffer stopped
            except ray.exceptions.RayActorError as error:
                if self.workers_lost >= WORKER_REPLACEMENTS_PER_WORKER * self.config.rollout.num_workers:
                    raise PipelineError(
                        f"rollout workers died {self.workers_lost + 1} times; the last one said: {error}"
                    ) from error
            lost = ray.get(self.buffer.worker_lost.remote(worker_id))
            log.warning("rollout worker %s died; %d episodes in flight are sampled again", worker_id, lost)
            self.env_run.worker_lost(worker_id)
            self.workers_lost += 1
            del self.workers[worker_id]
            self._start_worker()

    def wait(self, ref: ray.ObjectRef) -> Any:
        """ray.get(ref), replacing rollout workers that die meanwhile."""
        while True:
            done, _ = ray.wait([ref], timeout=WATCH_INTERVAL_S)
            finished, _ = ray.wait(list(self._runs), num_returns=len(self._runs), timeout=0)
            self._replace_dead_workers(finished)
            if done:
                return ray.get(ref)

    def next_batch(self, step: int) -> list[Trajectory]:
        return self.wait(self.buffer.get_batch.remote(step))

    def train_step(self, trajectories: list[Trajectory]) -> dict[str, float]:
        return self.trainer.train_step(trajectories)

    def sync_weights(self) -> int:
        """Push the trainer's weights to every engine; returns the new version."""
        return self.weight_sync.push()

    def shrink_engines(self) -> list[int]:
        """Sleep engines down to multiplex.min_awake; new episodes go only to the engines left awake."""
        keep = self.engines.awake[: self.config.multiplex.min_awake]
        self.set_active_engines(keep)
        return self.engines.shrink(len(keep))

    def expand_engines(self) -> None:
        if self.engines.asleep:
            self.engines.expand()
            self.set_active_engines(self.engines.awake)

    def save(self, log: RunLog, step: int) -> None:
        folder = log.checkpoint_dir(step)
        self.trainer.save(str(folder))
        state: dict[str, Any] = {"step": step, "next_group": self.next_group(), **self.env_run.state()}
        log.mark_checkpoint(step, state, self.config.keep_checkpoints)

    def export_model(self, folder: Path) -> None:
        """The trained policy as a Hugging Face folder (`roll serve --model FOLDER` serves it)."""
        self.trainer.export_hf(str(folder))

    def load(self, folder: Path) -> int:
        return self.trainer.load(str(folder))

    def set_step(self, step: int) -> None:
        ray.get(self.buffer.set_step.remote(step))

    def set_active_engines(self, indices: list[int]) -> None:
        ray.get([w.set_active_engines.remote(indices) for w in self.workers.values()])

    def evaluate(self, tasks: list[EpisodeTask], sampling: Any) -> list[Trajectory | None]:
        workers = list(self.workers.values())
        shares = [tasks[i :: len(workers)] for i in range(len(workers))]
        refs = [w.evaluate.remote(share, sampling) for w, share in zip(workers, shares, strict=True)]
        results: list[Trajectory | None] = []
        for ref, share in zip(refs, shares, strict=True):
            try:
                results.extend(self.wait(ref))
            except ray.exceptions.RayActorError:
                results.extend([None] * len(share))  # its worker died: counted as failed episodes
        return results

    def buffer_stats(self) -> dict[str, int]:
        return ray.get(self.buffer.stats.remote())

    def next_group(self) -> int:
        return ray.get(self.buffer.next_group.remote())

    def ready_groups(self) -> int:
        return ray.get(self.buffer.ready_groups.remote())

    def shutdown(self) -> None:
        ray.get(self.buffer.stop.remote())
        for handle in [*self.workers.values(), *self.engines.handles, self.buffer]:
            ray.kill(handle)
        self.trainer.kill()
        self.env_run.close()


def check_resources(config: TrainConfig) -> None:
    """On a local Ray the roles must fit the machine: Ray never places an actor that asks for more than the
    node has, and waits for it without a word."""
    if config.ray.address is not None:
        return  # a cluster may grow (autoscaling); its own scheduler reports what it cannot place
    res, engines, have = config.resources, config.engines.num_engines, ray.cluster_resources()
    for name, key, trainer, engine in (
        ("CPU", "cpus", res.trainer_cpus, res.engine_cpus),
        ("GPU", "gpus", res.trainer_gpus, res.engine_gpus),
    ):
        need = res.trainer_ranks * trainer + engines * engine
        if need > have.get(name, 0.0) + 1e-9:
            raise PipelineError(
                f"the roles ask Ray for {need:g} {name}s (resources.trainer_ranks {res.trainer_ranks} x "
                f"resources.trainer_{key} {trainer:g} + engines.num_engines {engines} x "
                f"resources.engine_{key} {engine:g}), the local Ray has {have.get(name, 0.0):g}; "
                "lower those values (fractions are allowed)"
            )


def base_gpu_id(config: TrainConfig, index: int) -> int:
    """The first GPU of engine `index`. Engines that declare GPUs get their own from Ray (numbered from 0
    in their process); colocated SGLang engines (engine_gpus: 0) take consecutive tp_size ranges of the
    node's GPUs, which they share with the trainer."""
    engine = config.engines.engine
    if engine.type == "sglang" and config.resources.engine_gpus == 0:
        return index * engine.tp_size
    return 0


def init_ray(config: TrainConfig) -> None:
    """Join `ray.address`, or start this run's own local Ray (never one a killed driver left behind)."""
    if ray.is_initialized():
        return
    address = config.ray.address or os.environ.get("RAY_ADDRESS") or None
    if address is not None:
        if address != "auto":
            present_local_token()
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
        return
    from roll.pipeline.ray_session import new_temp_dir, stop_previous

    stopped = stop_previous(config.run_dir)
    if stopped:
        log.warning(
            "stopped %d Ray processes a killed driver of %s had left running", stopped, config.run_dir
        )
    ray.init(
        address="local",
        num_cpus=config.ray.num_cpus,
        include_dashboard=False,
        log_to_driver=False,
        _temp_dir=new_temp_dir(config.run_dir),
    )


def present_local_token() -> None:
    """Join an explicit address with token authentication when this machine holds a Ray token.

    `ray start` (and any earlier local run) writes ~/.ray/auth_token and turns token authentication on;
    Ray presents that token by itself only for a cluster it finds locally, so `ray.address=HOST:PORT` would be
    refused (InvalidAuthToken). An explicit RAY_AUTH_MODE (or no token at all) is left as it is.
    """
    from ray._private.authentication.authentication_token_setup import (
        maybe_enable_token_auth_if_token_available,
    )

    maybe_enable_token_auth_if_token_available(warn_if_disabled=False)
