"""Agent-native IPA training rounds with a real model: `builtin:tiny-qwen3-moe` served in-process by the torch
engine, the ModelProxyService in train mode, a real terminal task in ROCK sandboxes, the torch train backend.

The tiny model is random, so what it does is known without scripting it: from the last start point (the
expert's command already replayed) any answer completes the task; from scratch it never does."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from rock.proxy import ProxyConfig
from rock.proxy.server import ProxyThread
from roll.algo.config import IPALossConfig
from roll.algo.losses import build_loss
from roll.rollout.agentic.batches import round_trajectories
from roll.rollout.agentic.config import IPATerminalConfig
from roll.rollout.agentic.expert import oracle_expert
from roll.rollout.agentic.expert_book import ExpertBook
from roll.rollout.agentic.resampling import SequentialRollback
from roll.rollout.agentic.rounds import EpisodeRunner, resample_round
from roll.rollout.agentic.serving import EngineServer
from roll.rollout.agentic.training import RoundTrainer
from roll.trainer.packing import PackedBatch, pack_trajectories
from rome.terminal_tasks.task import Task, load_task

pytestmark = [pytest.mark.docker, pytest.mark.slow]
SUITE = Path(__file__).resolve().parents[2] / "rome" / "tasks" / "terminal-pro"
MODEL = "builtin:tiny-qwen3-moe"


@pytest.fixture(scope="module")
def fleet_url() -> Iterator[str]:
    from rock.fleet import LocalFleet
    from rock.images import ensure_base_images

    ensure_base_images()
    with LocalFleet(slots=4) as fleet:
        yield fleet.url


@pytest.fixture(scope="module")
def config() -> IPATerminalConfig:
    return IPATerminalConfig.model_validate(
        {
            "model": MODEL,
            "task_ids": ["find-large-files"],
            "anchors": 2,
            "rollback": {"threshold": 0.5, "min_samples": 1},
            "max_turns": 2,
            "max_tokens": 16,
            "agent_timeout_s": 120,
            "train": {"steps_per_round": 2, "optimizer": {"lr": 1e-3}},
        }
    )


def loss_gradient(batch: PackedBatch, loss_config: IPALossConfig) -> torch.Tensor:
    """d loss / d logprobs of every token under `loss_config`, at pi_theta = pi_old = mu (no mismatch)."""
    loss = build_loss(loss_config)
    prepared = loss.prepare(batch)
    logprobs = batch.engine_logprobs.clone().requires_grad_()
    loss(prepared, logprobs, logprobs.detach()).loss.backward()
    assert logprobs.grad is not None
    return logprobs.grad


def token_flags(batch: PackedBatch, chunk_flags: torch.Tensor) -> torch.Tensor:
    return batch.loss_mask & chunk_flags[batch.chunk_index.clamp(min=0)]


def test_resampled_rounds_train_policy_chunks_by_rl_and_expert_chunks_by_imitation(
    fleet_url: str, config: IPATerminalConfig
):
    from rich.console import Console

    from roll.models import load_model

    task = load_task(SUITE / "find-large-files")
    assert isinstance(task, Task)
    expert = oracle_expert(task)
    assert len(expert) == 2  # the find command, then the final message
    loaded = load_model(MODEL)  # the engine's own copy: its weights change
    tokenizer = loaded.tokenizer
    initial = {name: value.clone() for name, value in loaded.model.state_dict().items()}
    trainer = RoundTrainer(config)
    schedule = SequentialRollback(len(expert), config.rollback.threshold, config.rollback.min_samples)
    schedules = {task.id: schedule}
    book = ExpertBook({task.id: expert})
    console = Console(file=io.StringIO())
    with (
        EngineServer(loaded) as engine,
        ProxyThread(
            ProxyConfig(mode="train", upstream_url=engine.url, max_tokens=16, temperature=0.0)
        ) as proxy,
    ):
        runner = EpisodeRunner(config, fleet_url)

        # Round 0: anchors 1 (the expert's command replayed) and 0 (from scratch).
        (task_round,) = resample_round(0, [task], book, schedules, runner, proxy.url, console)
        episodes, entry = task_round.episodes, task_round.entry
        starts = [e.trajectory.metadata["start"] if e.trajectory else None for e in episodes]
        assert starts == [1, 0], [e.trial.error for e in episodes]
        assert entry["anchors"] == {"1": (1, 1), "0": (0, 1)}
        assert schedule.current == 0  # start 1 is learned: the rollback moves back
        first_round = round_trajectories(task.id, 0, episodes, expert, tokenizer)
        assert [t.reward for t in first_round] == [1.0, 0.0]
        assert not any(t.metadata.get("imitation") for t in first_round)  # a positive sample exists
        prefilled = first_round[0]
        assert "find /srv/data -type f -size +102400c" in tokenizer.decode(prefilled.chunks[0].context_ids)
        for trajectory in first_round:
            for chunk in trajectory.chunks:
                assert not chunk.expert and chunk.output_logprobs is not None and chunk.weight_version == 0

        summary = trainer.train(first_round)
        batch = trainer.last_batch
        assert batch is not None
        # The failure has return 0 everywhere (no baseline): no gradient, so it is not packed. Of the
        # success, only what the policy generated is trained; the replayed expert prefix is context.
        assert summary["trained_trajectories"] == 1
        outputs = [t for chunk in prefilled.chunks for t in chunk.output_ids]
        assert batch.input_ids[batch.loss_mask].tolist() == outputs
        assert summary["expert_tokens"] == 0 and summary["policy_tokens"] == len(outputs)
        assert "expert_nll_before" not in summary
        assert summary["trainer_version"] == 2 and trainer.backend.version == 2

        engine.update_weights(*trainer.weights())
        assert engine.health()["weight_version"] == 2
        served = loaded.model.state_dict()
        trained = trainer.backend.model.state_dict()
        changed = [name for name in served if not torch.equal(served[name], initial[name])]
        assert changed and all(torch.equal(served[name], trained[name]) for name in served)

        # Round 1: only start 0, where the policy fails: the imitation fallback adds the expert's chunk.
        (task_round,) = resample_round(1, [task], book, schedules, runner, proxy.url, console)
        episodes, entry = task_round.episodes, task_round.entry
        assert entry["anchors"] == {"0": (0, 1)}
        second_round = round_trajectories(task.id, 1, episodes, expert, tokenizer)
        assert len(second_round) == 2
        policy, imitation = second_round
        assert policy.chunks[0].weight_version == 2  # sampled by the trained weights
        assert imitation.metadata["imitation"] and imitation.metadata["start"] == 0
        assert len(imitation.chunks) == 1
        expert_chunk = imitation.chunks[0]
        assert expert_chunk.expert and expert_chunk.output_logprobs is None
        # Conditioned on exactly the context the policy had, answering with the expert's command.
        assert expert_chunk.context_ids == policy.chunks[0].context_ids
        assert tokenizer.decode(expert_chunk.output_ids).startswith(
            '<tool_call>{"name": "run_shell_command", "arguments": {"command": "find /srv/data'
        )

        # In one batch: RL reaches the policy's positive chunks and never the expert chunk; the imitation
        # term reaches the expert chunk only.
        mixed = pack_trajectories([*first_round, imitation])
        expert_tokens = token_flags(mixed, mixed.chunk_expert)
        positive_tokens = token_flags(mixed, (mixed.chunk_reward > 0) & ~mixed.chunk_expert)
        rl = loss_gradient(mixed, IPALossConfig(lambda_il=0.0))
        il = loss_gradient(mixed, IPALossConfig(lambda_rl=0.0))
        assert torch.equal(rl != 0, positive_tokens)
        assert torch.equal(il != 0, expert_tokens)

        summary = trainer.train(second_round)
        assert (
            summary["expert_nll_after"] < summary["expert_nll_before"]
        )  # imitation made the expert likelier
        assert summary["trained_trajectories"] == summary["imitation_trajectories"] == 1 and summary[
            "expert_tokens"
        ] == len(expert_chunk.output_ids)
        engine.update_weights(*trainer.weights())
        assert engine.health()["weight_version"] == 4 == trainer.backend.version
