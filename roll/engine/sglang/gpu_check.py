"""SGLang engine checks for the GPU check (`python -m roll.gpu_check`); needs CUDA and sglang.

One engine on the model in float32, compared with transformers on the same GPU: greedy tokens and their
logprobs, seeded sampling with n=2, abort of a running request, weight updates from tensors (a negated lm_head
changes the output, the original weights bring it back), from a weights group (the trainer's sender, which the
caller passes as `join_sender`, in this process, the engine its rank 1; gloo, as NCCL needs a GPU per rank)
and from the model folder, sleep/wake, and a flushed prefix cache. Each is one (name, ok, detail) row; a
failed step does not stop the later ones.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from roll.engine.sglang.config import SGLangEngineConfig
from roll.engine.sglang.engine import SGLangEngine
from roll.engine.types import GenerateRequest, SamplingParams

NEW_TOKENS = 16
# SGLang's float32 kernels (attention backend, fused MoE) round differently from transformers' eager path.
LOGPROB_TOLERANCE = 1e-2
PROMPTS = ["Hi", "What is the capital of France? Answer briefly.", "List three colours of the rainbow:"]

Row = tuple[str, bool, str]
JoinSender = Callable[..., Any]


def run_checks(model_id: str, join_sender: JoinSender) -> list[Row]:
    """`join_sender(address, port, rank, world, backend=...)`: the trainer's side of a weights group
    (`roll.trainer.megatron.weight_sync.init_weight_group`), passed in: the engine never imports a
    trainer."""
    return asyncio.run(_run(model_id, join_sender))


def _greedy(prompt: list[int], request_id: str) -> GenerateRequest:
    params = SamplingParams(temperature=0.0, max_new_tokens=NEW_TOKENS)
    return GenerateRequest(request_id=request_id, prompt_token_ids=prompt, params=params)


async def _run(model_id: str, join_sender: JoinSender) -> list[Row]:
    import torch

    from roll.engine.reference import forward_logprobs, greedy_generate
    from roll.models import load_model

    loaded = load_model(model_id, dtype=torch.float32, device="cuda")
    prompts = [loaded.tokenizer(text, add_special_tokens=False)["input_ids"] for text in PROMPTS]
    expected = [greedy_generate(loaded, p, NEW_TOKENS) for p in prompts]
    original = {name: t.detach().clone() for name, t in loaded.model.state_dict().items()}
    engine = SGLangEngine(loaded.path, SGLangEngineConfig(dtype="float32", mem_fraction_static=0.3))
    rows: list[Row] = []

    async def step(name: str, check: Callable[[], Awaitable[str]]) -> bool:
        try:
            rows.append((name, True, await check()))
            return True
        except Exception as error:  # a failed step is a row; the next steps still run
            rows.append((name, False, f"{type(error).__name__}: {error}"))
            return False

    async def greedy_tokens(tag: str) -> list[list[int]]:
        results = await asyncio.gather(
            *(engine.generate(_greedy(p, f"{tag}{i}")) for i, p in enumerate(prompts))
        )
        return [r.completions[0].token_ids for r in results]

    async def start() -> str:
        await engine.start()
        return f"sglang.Engine on {loaded.path.name}, float32, context {engine.max_context}"

    async def greedy_equals_transformers() -> str:
        results = await asyncio.gather(*(engine.generate(_greedy(p, f"g{i}")) for i, p in enumerate(prompts)))
        worst = 0.0
        for prompt, want, result in zip(prompts, expected, results, strict=True):
            got = result.completions[0]
            if got.token_ids != want:
                raise AssertionError(f"greedy tokens {got.token_ids} != transformers {want}")
            reference = forward_logprobs(loaded, prompt, got.token_ids)
            chosen = reference[torch.arange(len(got.token_ids)), got.token_ids]
            worst = max(worst, float((torch.tensor(got.logprobs) - chosen).abs().max()))
        if worst > LOGPROB_TOLERANCE:
            raise AssertionError(f"logprobs differ from transformers by {worst:.2e} > {LOGPROB_TOLERANCE}")
        return f"{len(prompts)} prompts equal transformers generate; logprobs max |diff| {worst:.1e}"

    async def seeded_sampling() -> str:
        params = SamplingParams(temperature=1.0, max_new_tokens=NEW_TOKENS, seed=3, n=2, top_logprobs=2)
        result = await engine.generate(
            GenerateRequest(request_id="n2", prompt_token_ids=prompts[1], params=params)
        )
        for c in result.completions:
            if len(c.logprobs) != len(c.token_ids) or any(not lp <= 0.0 for lp in c.logprobs):
                raise AssertionError(f"completion {c.index}: logprobs {c.logprobs} for ids {c.token_ids}")
            if c.top_logprobs is None or len(c.top_logprobs) != len(c.token_ids):
                raise AssertionError(f"completion {c.index}: top logprobs missing or misaligned")
        lengths = [len(c.token_ids) for c in result.completions]
        return (
            f"n=2 completions of {lengths} tokens, logprobs and top-2 alternatives; ttft {result.ttft_s:.3f}s"
        )

    async def abort() -> str:
        params = SamplingParams(max_new_tokens=2048, ignore_eos=True)
        request = GenerateRequest(request_id="long", prompt_token_ids=prompts[0], params=params)
        tokens, reason = 0, None
        async for delta in engine.stream(request):
            tokens += len(delta.token_ids)
            reason = delta.finish_reason or reason
            if tokens and reason is None:
                await engine.abort("long")
        if reason != "abort" or tokens >= 2048:
            raise AssertionError(f"after abort: finish {reason!r} with {tokens} tokens")
        return f"stream aborted after {tokens} tokens, finish_reason abort"

    async def update_from_tensors() -> str:
        negated = {name: (-t if name == "lm_head.weight" else t) for name, t in original.items()}
        await engine.update_weights(negated, 1)
        changed = await greedy_tokens("neg")
        await engine.update_weights(original, 2)
        restored = await greedy_tokens("orig")
        if changed == expected:
            raise AssertionError("a negated lm_head left the greedy tokens unchanged")
        if restored != expected:
            raise AssertionError(f"original weights give {restored}, expected {expected}")
        version = engine.weight_version
        return f"negated lm_head changed the output; the original weights restored it (version {version})"

    async def update_from_group() -> str:
        import torch.distributed as dist

        from roll.engine.sglang.translate import tensor_specs
        from roll.models.layout import to_checkpoint_layout

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        world = 1 + engine.config.tp_size
        group, _ = await asyncio.gather(
            asyncio.to_thread(join_sender, "127.0.0.1", port, 0, world, backend="gloo"),
            engine.join_weight_group("127.0.0.1", port, 1, world, backend="gloo"),
        )

        async def send(weights: dict[str, torch.Tensor], version: int) -> None:
            named = [(n, t.cpu()) for n, t in to_checkpoint_layout(weights).items()]

            def broadcast() -> None:
                for _, tensor in named:
                    dist.broadcast(tensor, src=0, group=group)

            await asyncio.gather(
                engine.update_weights_from_group(tensor_specs(named), version), asyncio.to_thread(broadcast)
            )

        await send({n: (-t if n == "lm_head.weight" else t) for n, t in original.items()}, 4)
        changed = await greedy_tokens("gneg")
        await send(original, 5)
        restored = await greedy_tokens("gorig")
        dist.destroy_process_group(group)
        if changed == expected or restored != expected:
            raise AssertionError(f"negated lm_head gave {changed}, original weights {restored}")
        return f"broadcast {len(original)} tensors twice (negated lm_head, then original); version 5"

    async def update_from_disk() -> str:
        await engine.update_weights(Path(loaded.path), 6)
        if (tokens := await greedy_tokens("disk")) != expected:
            raise AssertionError(f"after update_weights_from_disk: {tokens}")
        return f"reloaded {loaded.path.name}; greedy output unchanged (version {engine.weight_version})"

    async def sleep_wake() -> str:
        await engine.sleep()
        asleep = engine.stats().sleeping
        await engine.wake()
        tokens = await greedy_tokens("wake")
        if not asleep or tokens != expected:
            raise AssertionError(f"asleep={asleep}; after wake the greedy output is {tokens}")
        return "released and resumed GPU memory; greedy output unchanged"

    async def flush() -> str:
        await engine.flush_cache()
        if (tokens := await greedy_tokens("flush")) != expected:
            raise AssertionError(f"after flush_cache: {tokens}")
        stats = engine.stats()
        cached = stats.prefix_cache_hit_tokens
        return f"{stats.requests_finished} requests so far, {cached} prompt tokens served from the cache"

    if not await step("start", start):
        return rows
    try:
        for name, check in [
            ("greedy = transformers", greedy_equals_transformers),
            ("sampling n=2, logprobs", seeded_sampling),
            ("abort", abort),
            ("update_weights from tensors", update_from_tensors),
            ("update_weights from a weights group", update_from_group),
            ("update_weights from disk", update_from_disk),
            ("sleep / wake", sleep_wake),
            ("flush_cache", flush),
        ]:
            await step(name, check)
    finally:
        await engine.shutdown()
    return rows
