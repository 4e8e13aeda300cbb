"""Episodes of a run as ATIF, under runs/<name>/episodes/: every evaluation episode and a sample of each
step's training episodes, so they open in `roll view` and in any ATIF tool.

    episodes/eval/<evaluation label>/<task@k>.json     (seed-named for GEM envs)
    episodes/train/step_000003/<task>-<n>.json

The steps are the episode's chat (the transcript its env manager kept in the trajectory's metadata); ALE's
own facts go in `extra`: on the trajectory the reward, success, start point k and how it ended; on each
agent step that was a trained LLM call, its chunk: index, weight version, the task-aware mask (`relevant`),
whether its tool call failed, whether it is an expert (imitation) chunk, its token counts and engine
logprobs' mean, and with token_ids on, the chunk's context and output ids and logprobs. The agent steps the
expert prefilled before start point k are not chunks: they are marked `is_copied_context`.
"""

from __future__ import annotations

import random
import re
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import atif
from pydantic import Field

from iflow.atif import build_trajectory, steps_from_messages, write_trajectory
from roll.config import StrictConfig
from roll.types import Chunk, Trajectory

if TYPE_CHECKING:
    import torch

    from roll.algo.config import LossConfig

# The trainer's per-token logprobs [T] of a list of trajectories (packed as the trainer packs them).
Score = Callable[[list[Trajectory]], "torch.Tensor"]

TRANSCRIPT = "transcript"  # the metadata key env managers keep an episode's chat under
FOLDER = "episodes"


class EpisodeLogConfig(StrictConfig):
    """Which episodes a run keeps as ATIF under runs/<name>/episodes/."""

    eval: bool = Field(True, description="Keep every evaluation episode.")
    train_per_step: int = Field(2, ge=0, description="Training episodes kept per step (a random sample).")
    token_ids: bool = Field(
        False, description="Also keep each chunk's context and output token ids and logprobs (large files)."
    )
    ratios: bool = Field(
        True,
        description="Score the kept training episodes under the trainer's weights before the step (one "
        "forward pass over them) for each chunk's mismatch ratio pi_old/mu and IPA's mask.",
    )


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9@#._-]+", "-", text).strip("-") or "episode"


def chunk_mismatch(
    trajectories: list[Trajectory], old_logprobs: torch.Tensor, high: float, low: float | None
) -> list[list[tuple[float, bool]]]:
    """Per trajectory, per chunk: IPA's mismatch ratio exp(mean(log pi_old - log mu)) over the chunk's
    generated tokens (1 for a chunk without engine logprobs) and whether IPA's mask keeps it (ratio <= H,
    and >= L when L is set). `old_logprobs` are the trainer's per-token logprobs of the packed trajectories
    before the step, pi_old."""
    from roll.algo.losses import behaviour_logprobs, mismatch_mask
    from roll.algo.segments import segment_mean
    from roll.trainer.packing import pack_trajectories

    batch = pack_trajectories(trajectories)
    mu = behaviour_logprobs(batch, old_logprobs)
    ratio = segment_mean(old_logprobs - mu, batch.chunk_index, batch.num_chunks).exp()
    kept = mismatch_mask(ratio, high, low)
    out: list[list[tuple[float, bool]]] = [[] for _ in trajectories]
    for chunk in range(batch.num_chunks):
        out[int(batch.chunk_traj[chunk])].append((float(ratio[chunk]), bool(kept[chunk])))
    return out


def chunk_facts(
    index: int, chunk: Chunk, token_ids: bool, mismatch: tuple[float, bool] | None = None
) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "index": index,
        "weight_version": chunk.weight_version,
        "relevant": chunk.relevant,
        "error": chunk.error,
        "expert": chunk.expert,
        "context_tokens": len(chunk.context_ids),
        "output_tokens": len(chunk.output_ids),
    }
    if chunk.output_logprobs:
        facts["logprob_mean"] = statistics.fmean(chunk.output_logprobs)
    if mismatch is not None:
        ratio, kept = mismatch
        facts["mismatch_ratio"] = ratio
        facts["ipa_mask"] = kept  # False: IPA drops the chunk for its engine/trainer mismatch
    if token_ids:
        facts["context_ids"] = chunk.context_ids
        facts["output_ids"] = chunk.output_ids
        facts["output_logprobs"] = chunk.output_logprobs
    return facts


def _steps(
    trajectory: Trajectory, token_ids: bool, mismatch: list[tuple[float, bool]] | None
) -> list[atif.Step]:
    transcript = trajectory.metadata.get(TRANSCRIPT) or []
    steps = steps_from_messages(transcript)
    agent_steps = [step for step in steps if step.source == "agent"]
    chunks = trajectory.chunks
    # The last len(chunks) agent steps are the LLM calls; any before them were prefilled by the expert.
    prefilled = max(len(agent_steps) - len(chunks), 0)
    for step in agent_steps[:prefilled]:
        step.is_copied_context = True
        step.llm_call_count = 0
        step.extra = {**(step.extra or {}), "expert_prefill": True}
    for index, (step, chunk) in enumerate(zip(agent_steps[prefilled:], chunks, strict=False)):
        facts = chunk_facts(index, chunk, token_ids, mismatch[index] if mismatch else None)
        step.extra = {**(step.extra or {}), "chunk": facts}
        step.metrics = atif.Metrics(
            prompt_tokens=len(chunk.context_ids),
            completion_tokens=len(chunk.output_ids),
            prompt_token_ids=chunk.context_ids if token_ids else None,
            completion_token_ids=chunk.output_ids if token_ids else None,
            logprobs=chunk.output_logprobs if token_ids else None,
        )
    if not transcript:  # an env manager that keeps no chat: the chunks alone, as token counts
        steps = [
            atif.Step(
                step_id=index + 1,
                source="agent",
                message=f"(LLM call {index}: {len(chunk.output_ids)} tokens; no transcript was kept)",
                extra={"chunk": chunk_facts(index, chunk, token_ids, mismatch[index] if mismatch else None)},
            )
            for index, chunk in enumerate(chunks)
        ]
    return steps


def episode_trajectory(
    trajectory: Trajectory,
    run: str,
    kind: str,
    label: str,
    token_ids: bool = False,
    mismatch: list[tuple[float, bool]] | None = None,
) -> atif.Trajectory:
    """One episode as ATIF; `kind` is "eval" or "train", `label` the evaluation's or the step's name,
    `mismatch` each chunk's mismatch ratio and IPA mask (see `chunk_mismatch`) when they were measured."""
    meta = {k: v for k, v in trajectory.metadata.items() if k != TRANSCRIPT}
    return build_trajectory(
        _steps(trajectory, token_ids, mismatch),
        agent_name="iflow" if "start" in meta else "roll-gem",
        model_name=meta.get("model"),
        session_id=f"{run}/{kind}/{label}/{episode_name(trajectory)}",
        extra={
            "ale": "roll-episode/1",
            "run": run,
            "kind": kind,
            "label": label,
            "task_id": trajectory.task_id,
            "group_id": trajectory.group_id,
            "reward": trajectory.reward,
            "success": meta.get("success"),
            "start": meta.get("start"),
            "end": meta.get("end"),
            "chunk_boundaries": _boundaries(trajectory),
            "weight_versions": sorted({c.weight_version for c in trajectory.chunks}),
            "metadata": meta,
        },
    )


def _boundaries(trajectory: Trajectory) -> list[list[int]]:
    """Each chunk's [start, end) of its output tokens in the episode's packed sequence: a chunk's context
    extends the previous chunk's context and output, so its output starts where its context ends."""
    spans = []
    for chunk in trajectory.chunks:
        start = len(chunk.context_ids)
        spans.append([start, start + len(chunk.output_ids)])
    return spans


def episode_name(trajectory: Trajectory) -> str:
    meta = trajectory.metadata
    if "task" in meta and "start" in meta:
        name = f"{meta['task']}@{meta['start']}"
    else:
        name = f"seed-{meta.get('seed')}"  # a GEM episode: the env is the run's, the seed names it
    return slug(f"{name}#{meta.get('index', 0)}")


def save_eval_episodes(run_dir: Path, label: str, played: list[Trajectory], config: EpisodeLogConfig) -> int:
    if not config.eval:
        return 0
    folder = run_dir / FOLDER / "eval" / slug(label)
    for trajectory in played:
        document = episode_trajectory(trajectory, run_dir.name, "eval", label, config.token_ids)
        write_trajectory(folder / f"{episode_name(trajectory)}.json", document)
    return len(played)


def save_train_sample(
    run_dir: Path,
    step: int,
    batch: list[Trajectory],
    config: EpisodeLogConfig,
    loss: LossConfig | None = None,
    score: Score | None = None,
    seed: int = 0,
) -> int:
    """A random sample of the step's episodes (imitation trajectories are no episodes and are skipped).
    With `score` (the trainer's logprobs, called before the step) and a loss with IPA's mismatch bounds,
    each chunk also gets its mismatch ratio and IPA's mask."""
    episodes = [t for t in batch if not t.metadata.get("imitation")]
    sample = random.Random(seed * 1_000_003 + step).sample(
        episodes, min(config.train_per_step, len(episodes))
    )
    folder = run_dir / FOLDER / "train" / f"step_{step:06d}"
    high = getattr(loss, "mismatch_high", None)
    mismatch: list[list[tuple[float, bool]] | None] = [None] * len(sample)
    if sample and score is not None and config.ratios and high is not None:
        mismatch = list(chunk_mismatch(sample, score(sample), high, getattr(loss, "mismatch_low", None)))
    for number, (trajectory, ratios) in enumerate(zip(sample, mismatch, strict=True)):
        document = episode_trajectory(
            trajectory, run_dir.name, "train", f"step {step}", config.token_ids, ratios
        )
        write_trajectory(folder / f"{number:02d}-{episode_name(trajectory)}.json", document)
    return len(sample)
