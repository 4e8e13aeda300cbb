"""Throughput of the torch engine on an agentic request mix, against transformers `generate`.

16 chat requests arrive at once, as an agentic rollout sends them (see agentic_mix.py): real iFlow requests,
each carrying iFlow's system prompt and tool schemas (~2,000 tokens), 4 tasks x 4 rollouts, each rollout at
its own turn with its own tool calls and results. Output lengths are mixed (32 to 256 tokens: a bare tool
call, or reasoning and a tool call). All three contenders decode greedily and produce exactly the requested
number of tokens per request (eos ignored, as an ordinary token), so they do the same useful work:

- engine: all 16 submitted to `TorchEngine` concurrently (continuous batching, chunked prefill, prefix reuse);
- sequential: transformers `generate`, one request after the other;
- padded batch: transformers `generate` on all 16 as one left-padded batch, run to the longest output.

Tokens/s counts the requested output tokens only; tokens per CPU-second (this process's CPU time, all
threads) is also shown, since wall time on a machine shared with other work swings with their load. TTFT is
measured from the moment all requests are submitted (for the sequential baseline a request waits for the ones
before it). The engine's tokens are checked against the sequential baseline's, token for token. Finally the
engine is put to sleep and woken, and the resident memory it frees is reported.

    nice python benchmarks/engine_throughput.py [--quick] [--requests 16]
"""

from __future__ import annotations

import os

# On a shared CPU, OpenMP threads that spin while waiting for each other slow torch down many times over;
# passive waiting must be chosen before torch loads OpenMP.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import asyncio
import gc
import json
import statistics
import time
from dataclasses import dataclass

import torch
from agentic_mix import agentic_mix
from transformers.generation.streamers import BaseStreamer

from roll.engine.reference import batched_generate
from roll.engine.torch_engine import TorchEngine, TorchEngineConfig
from roll.engine.types import GenerateRequest, SamplingParams
from roll.models import LoadedModel, load_model


@dataclass
class Run:
    seconds: float
    cpu_seconds: float
    ttft: list[float]
    outputs: list[list[int]]

    def tokens_per_second(self, lengths: list[int]) -> float:
        return sum(lengths) / self.seconds

    def tokens_per_cpu_second(self, lengths: list[int]) -> float:
        return sum(lengths) / self.cpu_seconds


class _FirstToken(BaseStreamer):
    """Records when `generate` hands out its first new token (the first `put` is the prompt)."""

    def __init__(self) -> None:
        self.calls = 0
        self.first: float | None = None

    def put(self, value: torch.Tensor) -> None:
        self.calls += 1
        if self.calls == 2:
            self.first = time.perf_counter()

    def end(self) -> None:
        pass


def run_sequential(loaded: LoadedModel, mix: list[tuple[list[int], int]]) -> Run:
    start, cpu = time.perf_counter(), time.process_time()
    ttft, outputs = [], []
    for prompt, length in mix:
        streamer = _FirstToken()
        outputs.append(batched_generate(loaded, [prompt], length, ignore_eos=True, streamer=streamer)[0])
        ttft.append((streamer.first or time.perf_counter()) - start)
    return Run(time.perf_counter() - start, time.process_time() - cpu, ttft, outputs)


def run_padded_batch(loaded: LoadedModel, mix: list[tuple[list[int], int]]) -> Run:
    start, cpu = time.perf_counter(), time.process_time()
    streamer = _FirstToken()
    rows = batched_generate(
        loaded, [p for p, _ in mix], max(n for _, n in mix), ignore_eos=True, streamer=streamer
    )
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    first = (streamer.first or start) - start
    return Run(seconds, cpu, [first] * len(mix), [row[:n] for row, (_, n) in zip(rows, mix, strict=True)])


async def run_engine(engine: TorchEngine, mix: list[tuple[list[int], int]], tag: str) -> Run:
    start, cpu = time.perf_counter(), time.process_time()
    requests = [
        GenerateRequest(
            request_id=f"{tag}-{i}",
            prompt_token_ids=prompt,
            params=SamplingParams(temperature=0.0, max_new_tokens=n, ignore_eos=True),
        )
        for i, (prompt, n) in enumerate(mix)
    ]
    results = await asyncio.gather(*[engine.generate(r) for r in requests])
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return Run(seconds, cpu, [r.ttft_s for r in results], [r.completions[0].token_ids for r in results])


def _rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


async def engine_phase(loaded: LoadedModel, mix: list[tuple[list[int], int]]) -> tuple[Run, dict[str, float]]:
    engine = TorchEngine(loaded, TorchEngineConfig())
    await engine.start()
    # First-call costs (allocator, kernels) are not throughput; the warm-up shares no prefix with the mix.
    await run_engine(engine, [(list(range(1000, 1040)), 4)], "warmup")
    run = await run_engine(engine, mix, "run")
    stats = engine.stats()
    gc.collect()
    before = _rss_mib()
    await engine.sleep()
    gc.collect()
    asleep = _rss_mib()
    await engine.wake()
    await engine.shutdown()
    memory = {
        "rss_awake_mib": round(before, 1),
        "rss_asleep_mib": round(asleep, 1),
        "sleep_freed_mib": round(before - asleep, 1),
        "prefix_cache_hit_tokens": stats.prefix_cache_hit_tokens,
        "prompt_tokens_prefilled": stats.prompt_tokens,
        "decode_steps": stats.decode_steps,
    }
    return run, memory


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--quick", action="store_true", help="8 requests, outputs of at most 64 tokens")
    parser.add_argument("--model", default="builtin:smollm2-135m-instruct")
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads for all three (default: torch's)"
    )
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    count, max_output = (8, 64) if args.quick else (args.requests, 256)

    loaded = load_model(args.model)
    mix = agentic_mix(loaded, count, max_output)
    lengths = [n for _, n in mix]
    prompt_lengths = [len(p) for p, _ in mix]
    print(
        f"{count} requests, prompts {min(prompt_lengths)}-{max(prompt_lengths)} tokens "
        f"(total {sum(prompt_lengths)}), outputs {min(lengths)}-{max(lengths)} (total {sum(lengths)}), "
        f"torch threads {torch.get_num_threads()}"
    )

    engine_run, memory = asyncio.run(engine_phase(loaded, mix))
    print(f"engine done in {engine_run.seconds:.1f} s", flush=True)
    padded = run_padded_batch(loaded, mix)
    print(f"padded batch done in {padded.seconds:.1f} s", flush=True)
    sequential = run_sequential(loaded, mix)

    exact = sum(e == s for e, s in zip(engine_run.outputs, sequential.outputs, strict=True))
    rows = {"engine": engine_run, "sequential": sequential, "padded_batch": padded}
    result: dict[str, object] = {"benchmark": "engine_throughput", "model": args.model, "requests": count}
    for name, run in rows.items():
        tps = run.tokens_per_second(lengths)
        p50 = statistics.median(run.ttft)
        per_cpu = run.tokens_per_cpu_second(lengths)
        print(
            f"{name:>13}: {tps:7.1f} tokens/s  wall {run.seconds:6.1f} s  TTFT P50 {p50:6.2f} s  "
            f"{per_cpu:6.1f} tokens per CPU-second",
            flush=True,
        )
        result[f"{name}_tokens_per_s"] = round(tps, 2)
        result[f"{name}_tokens_per_cpu_s"] = round(per_cpu, 2)
        result[f"{name}_ttft_p50_s"] = round(p50, 3)
    vs_sequential = engine_run.tokens_per_second(lengths) / sequential.tokens_per_second(lengths)
    vs_padded = engine_run.tokens_per_second(lengths) / padded.tokens_per_second(lengths)
    print(
        f"engine / sequential: {vs_sequential:.2f}x (goal >= 4)   "
        f"engine / padded batch: {vs_padded:.2f}x (goal >= 1.2)"
    )
    cpu_vs_sequential = engine_run.tokens_per_cpu_second(lengths) / sequential.tokens_per_cpu_second(lengths)
    cpu_vs_padded = engine_run.tokens_per_cpu_second(lengths) / padded.tokens_per_cpu_second(lengths)
    print(
        f"per CPU-second (robust to other load): engine / sequential {cpu_vs_sequential:.2f}x, "
        f"engine / padded batch {cpu_vs_padded:.2f}x"
    )
    print(f"engine greedy tokens equal to sequential generate: {exact}/{count} requests", flush=True)
    print(
        f"sleep freed {memory['sleep_freed_mib']} MiB resident memory ({memory['rss_awake_mib']} -> "
        f"{memory['rss_asleep_mib']} MiB)"
    )
    result.update(
        speedup_vs_sequential=round(vs_sequential, 2),
        speedup_vs_padded_batch=round(vs_padded, 2),
        cpu_speedup_vs_sequential=round(cpu_vs_sequential, 2),
        cpu_speedup_vs_padded_batch=round(cpu_vs_padded, 2),
        exact_greedy_matches=exact,
        output_tokens=sum(lengths),
        prompt_tokens=sum(prompt_lengths),
        **memory,
    )
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
