"""Success of a model on fixed env seeds, played by the GEM env manager on an in-process torch engine.

The same episodes `roll train` evaluates (the env manager, its chat layout and limits), without Ray: for
measuring a warm start before spending an RL run on it.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass

from roll.engine.types import GenerateRequest, GenerateResult, SamplingParams
from roll.rollout.config import GEMEnvConfig, SamplingConfig
from roll.rollout.episode import EpisodeTask
from roll.rollout.gem_env import GEMEnvManager
from roll.types import Trajectory


@dataclass
class EvalResult:
    episodes: int
    wins: int
    turns: int
    format_errors: int
    trajectories: list[Trajectory]

    @property
    def success_rate(self) -> float:
        return self.wins / self.episodes if self.episodes else 0.0


async def evaluate_model(
    model: str,
    env: GEMEnvConfig,
    sampling: SamplingConfig,
    seeds: list[int],
    max_batch_size: int = 32,
) -> EvalResult:
    """Play one episode per seed, all at once on one engine; counts wins, turns and format errors."""
    from roll.engine.torch_engine import TorchEngine, TorchEngineConfig
    from roll.models import load_model

    loaded = load_model(model)
    engine = TorchEngine(loaded, TorchEngineConfig(max_batch_size=max_batch_size))
    manager = GEMEnvManager(env, loaded.tokenizer)
    request_ids = itertools.count()

    async def generate(prompt_ids: list[int], params: SamplingParams) -> GenerateResult:
        request = GenerateRequest(
            request_id=f"eval-{next(request_ids)}", prompt_token_ids=prompt_ids, params=params
        )
        return await engine.generate(request)

    await engine.start()
    try:
        trajectories = await asyncio.gather(
            *(manager.play(EpisodeTask(f"eval{seed}", seed), generate, sampling) for seed in seeds)
        )
    finally:
        await engine.shutdown()
    return EvalResult(
        episodes=len(trajectories),
        wins=sum(bool(t.metadata["success"]) for t in trajectories),
        turns=sum(int(t.metadata["turns"]) for t in trajectories),
        format_errors=sum(int(t.metadata["format_errors"]) for t in trajectories),
        trajectories=list(trajectories),
    )
