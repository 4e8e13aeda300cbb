"""The torch engine's sampler against `torch.multinomial`, on a real decode step, in one run.

RL rollouts sample every token (temperature 1). The engine draws each row's token from the row's own seeded
generator; `torch.multinomial`, which the engine used before and transformers' `generate` uses, draws one
random number per vocabulary entry (an exponential race), 49,152 of them a row for SmolLM2. The engine now
draws one uniform number per row and inverts the row's cumulative distribution.

A batch of `--rows` requests (a shared 330-token start and 60 tokens of their own, as agent turns look) is
prefilled into `EngineCore`, then decoded at temperature 1. Measured in 5 rounds, alternating (and swapping
which goes first) so that other load and the growing context fall on both alike:
- the sampler alone, on the logits of one decode step: ours (`sample_tokens`) against the same function with
  `torch.multinomial` per row;
- whole decode steps with each sampler in the engine.

Prints both, the ratios and a final JSON line. One intra-op thread, as the main job's engine runs.

    nice python benchmarks/engine_sampling.py [--rows 16] [--steps 40] [--model builtin:smollm2-135m-instruct]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import json
import statistics
import time
from collections.abc import Callable

import torch

import roll.engine.torch_engine.core as engine_core
from roll.engine.torch_engine.config import TorchEngineConfig
from roll.engine.torch_engine.core import EngineCore, Submit
from roll.engine.torch_engine.sampling import SampledToken, sample_tokens
from roll.engine.types import GenerateRequest, SamplingParams
from roll.models import load_model

Sampler = Callable[[torch.Tensor, list[SamplingParams], list[torch.Generator]], list[SampledToken]]


def multinomial_sample_tokens(
    logits: torch.Tensor, params: list[SamplingParams], generators: list[torch.Generator]
) -> list[SampledToken]:
    """The baseline: `sample_tokens` with each sampled row drawn by `torch.multinomial` (no top-k or top-p,
    which this benchmark does not ask for)."""
    logits = logits.float()
    logprobs = torch.log_softmax(logits, dim=-1)
    chosen = torch.argmax(logits, dim=-1)
    for row, row_params in enumerate(params):
        if row_params.temperature > 0:
            probs = torch.softmax(logits[row] / row_params.temperature, dim=-1)
            chosen[row] = torch.multinomial(probs, 1, generator=generators[row])[0]
    values = logprobs.gather(1, chosen.unsqueeze(1)).squeeze(1).tolist()
    return [SampledToken(t, v, None) for t, v in zip(chosen.tolist(), values, strict=True)]


def running_core(model_id: str, rows: int) -> EngineCore:
    loaded = load_model(model_id, dtype=torch.float32, device="cpu")
    config = TorchEngineConfig(max_batch_size=rows, prefix_cache_tokens=0, matmul_dtype="bfloat16")
    core = EngineCore(loaded.model, loaded.tokenizer, config, max_context=4096)
    start = list(range(1000, 1330))
    params = SamplingParams(temperature=1.0, max_new_tokens=4000, ignore_eos=True)
    core.step(
        [
            Submit(
                GenerateRequest(
                    request_id=f"r{i}", prompt_token_ids=[*start, *[2000 + i] * 60], params=params
                )
            )
            for i in range(rows)
        ]
    )
    while core.waiting:
        core.step([])
    return core


def seconds(work: Callable[[], object], repeats: int) -> float:
    started = time.perf_counter()
    for _ in range(repeats):
        work()
    return (time.perf_counter() - started) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="builtin:smollm2-135m-instruct")
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--steps", type=int, default=40, help="decode steps per timed round (5 rounds each)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    core = running_core(args.model, args.rows)
    with torch.inference_mode():
        logits = core.model(input_ids=torch.tensor([[1000 + i] for i in range(args.rows)])).logits[:, -1]
    params = [SamplingParams(temperature=1.0)] * args.rows
    generators = [torch.Generator().manual_seed(i) for i in range(args.rows)]
    samplers: dict[str, Sampler] = {"ours": sample_tokens, "multinomial": multinomial_sample_tokens}
    alone: dict[str, list[float]] = {name: [] for name in samplers}
    step: dict[str, list[float]] = {name: [] for name in samplers}
    for sampler in samplers.values():  # warm-up, untimed
        sampler(logits, params, generators)
        engine_core.sample_tokens = sampler
        core.step([])
    for round_number in range(5):
        # The batch's context grows with every step: alternate which sampler goes first, so neither always
        # decodes the shorter context.
        order = list(samplers.items())
        for name, sampler in order if round_number % 2 == 0 else order[::-1]:
            alone[name].append(seconds(lambda s=sampler: s(logits, params, generators), 20))
            engine_core.sample_tokens = sampler
            step[name].append(seconds(lambda: core.step([]), args.steps))
    engine_core.sample_tokens = sample_tokens
    ms = {
        f"{kind}_{name}_ms": statistics.median(times[name]) * 1000
        for kind, times in (("sampler", alone), ("step", step))
        for name in samplers
    }
    sampler_ratio = ms["sampler_multinomial_ms"] / ms["sampler_ours_ms"]
    step_ratio = ms["step_multinomial_ms"] / ms["step_ours_ms"]
    print(f"{args.rows} rows, vocabulary {logits.shape[-1]}, temperature 1, one thread (medians of 5 rounds)")
    for kind, label, ratio in (
        ("sampler", "sampler alone", sampler_ratio),
        ("step", "decode step  ", step_ratio),
    ):
        ours, baseline = ms[f"{kind}_ours_ms"], ms[f"{kind}_multinomial_ms"]
        print(f"  {label}: ours {ours:.2f} ms, multinomial {baseline:.2f} ms  ({ratio:.2f}x)")
    print(f"  load average {os.getloadavg()[0]:.2f}")
    result = {
        "rows": args.rows,
        **{k: round(v, 3) for k, v in ms.items()},
        "sampler_ratio": round(sampler_ratio, 2),
        "step_ratio": round(step_ratio, 3),
        "load": os.getloadavg()[0],
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
