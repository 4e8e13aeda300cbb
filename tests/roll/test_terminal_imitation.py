"""The imitation fallback of the IPA batch: a failed episode's expert chunks, in the context the policy had at
its start point, recorded through the real proxy (train mode) over `roll serve` with the scripted engine (a
test double of the model's choices); in one batch RL trains only the policy's positive chunks and the
imitation term only the expert's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import torch

from rock.proxy import ProxyClient, ProxyConfig
from roll.algo.batch import PackedBatch
from roll.algo.config import IPALossConfig
from roll.algo.losses import build_loss
from roll.engine.server.loopback import LoopbackServer
from roll.rollout.terminal.resampling.expert import ExpertStep
from roll.rollout.terminal.resampling.imitation import imitation_fallback
from roll.testing import ScriptedEngine
from roll.trainer.packing import pack_trajectories
from roll.types import Trajectory

EXPERT = [
    ExpertStep("ls /srv"),
    ExpertStep("find /srv -size +100k > /root/out.txt"),
    ExpertStep(None, "Done."),
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "run_shell_command",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
]


@pytest.fixture(scope="module")
def proxy_url(tiny_moe: Any) -> Iterator[str]:
    from rock.proxy.app import create_app as create_proxy
    from roll.engine.server import create_app

    engine = ScriptedEngine(tiny_moe.tokenizer, policy=lambda prompt: "I give up.")
    engine.weight_version = 3
    server = LoopbackServer(create_app(engine, tiny_moe), "scripted-engine")
    proxy = LoopbackServer(
        create_proxy(ProxyConfig(mode="train", upstream_url=f"{server.url}/v1")), "model-proxy"
    )
    try:
        yield proxy.url
    finally:
        proxy.close()
        server.close()


def failed_episode(proxy_url: str, start: int) -> Any:
    """An episode that started after EXPERT[:start] (its replayed messages) and failed at its first call."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a terminal agent."},
        {"role": "user", "content": "Find the large files."},
    ]
    for index, step in enumerate(EXPERT[:start]):
        messages.append(step.assistant_message(f"expert_{index}"))
        messages.append(
            {"role": "tool", "tool_call_id": f"expert_{index}", "content": "Output:\nExit code: 0"}
        )
    with ProxyClient(proxy_url) as proxy:
        episode_id = proxy.open_episode()
        body = {"model": "any", "messages": messages, "tools": TOOLS}
        answer = httpx.post(f"{proxy.episode_url(episode_id)}/chat/completions", json=body, timeout=60)
        answer.raise_for_status()
        return proxy.end_episode(episode_id)


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


def test_the_fallback_imitates_the_expert_step_in_the_policys_context(proxy_url: str, tiny_moe: Any) -> None:
    tokenizer = tiny_moe.tokenizer
    record = failed_episode(proxy_url, start=1)
    policy = record.chunks[0].chunk
    fallback = imitation_fallback(record, EXPERT, 1, tokenizer, "t", "g0/expert")

    assert fallback.group_id == "g0/expert" and fallback.reward == 1.0
    assert fallback.metadata == {"imitation": True, "success": True, "task": "t", "start": 1}
    # The replayed step and the step at the start point, each an expert chunk without engine logprobs,
    # counted at the version of the call it stands in for (the staleness bound applies).
    assert len(fallback.chunks) == 2
    assert all(c.expert and c.output_logprobs is None and c.weight_version == 3 for c in fallback.chunks)
    # The step at the start is conditioned on exactly the context the engine gave the policy.
    assert fallback.chunks[1].context_ids == policy.context_ids
    assert tokenizer.decode(fallback.chunks[1].output_ids).startswith(
        '<tool_call>{"name": "run_shell_command", "arguments": {"command": "find /srv -size +100k'
    )
    with pytest.raises(ValueError, match="no expert step to imitate"):
        imitation_fallback(record, EXPERT, 3, tokenizer, "t", "g0/expert")


def test_in_one_batch_rl_trains_positive_policy_chunks_and_imitation_the_expert_chunks(
    proxy_url: str, tiny_moe: Any
) -> None:
    failed = failed_episode(proxy_url, start=0)
    succeeded = failed_episode(proxy_url, start=2)
    fallback = imitation_fallback(failed, EXPERT, 0, tiny_moe.tokenizer, "t", "g1/expert")
    batch = pack_trajectories(
        [
            Trajectory(chunks=[failed.chunks[0].chunk], reward=0.0, group_id="g1"),
            Trajectory(chunks=[succeeded.chunks[0].chunk], reward=1.0, group_id="g2"),
            fallback,
        ]
    )
    expert_tokens = token_flags(batch, batch.chunk_expert)
    positive_tokens = token_flags(batch, (batch.chunk_reward > 0) & ~batch.chunk_expert)
    assert expert_tokens.any() and positive_tokens.any()
    rl = loss_gradient(batch, IPALossConfig(lambda_il=0.0))
    il = loss_gradient(batch, IPALossConfig(lambda_rl=0.0))
    assert torch.equal(rl != 0, positive_tokens)
    assert torch.equal(il != 0, expert_tokens)
