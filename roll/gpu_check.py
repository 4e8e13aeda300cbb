"""The prepared GPU check: what runs on CUDA, in one command that prints a table and fails if a check fails.

    python -m roll.gpu_check [--device cuda|cpu] [--model ID] [--json FILE]
    scripts/gpu_check.sh            # the same on a GPU machine, with the carried wheels and model

Rows:
- environment: torch, transformers, the device.
- torch engine: greedy tokens of four prompts (one long enough for chunked prefill), decoded together, equal
  transformers' own `generate` of each prompt alone; the engine's logprobs equal a plain forward pass's.
- torch trainer: one IPA step on trajectories the engine sampled. Before the step the trainer's logprobs of
  the sampled tokens equal the engine's; the step moves them; then the weights go to the engine as version 1,
  whose results carry that version and whose weights equal the trainer's exactly.
- megatron: the checks of `roll.trainer.megatron.gpu_check.run_checks()` (CUDA only).
- sglang: the checks of `roll.engine.sglang.gpu_check.run_checks()` (CUDA and sglang only).

A check that cannot run here (no CUDA, package not installed) is a `skip` row that says why, never a pass.
`--device cpu` (or ALE_GPU_CHECK_DEVICE=cpu) runs the same torch checks on the CPU: that is how the CPU suite
tests this module. The default model is `builtin:tiny-qwen3-moe` (a seeded 28 MB Qwen3-MoE): the GPU machine
cannot build the 98 MB SmolLM2 GGUF that other builtins need, so scripts/gpu_wheels.sh carries the tiny
model's built folder, or pass `--model FOLDER`.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Literal

DEVICE_ENV = "ALE_GPU_CHECK_DEVICE"
DEFAULT_MODEL = "builtin:tiny-qwen3-moe"
NEW_TOKENS = 16
# float32 on both sides: the engine's batched decode and a plain forward differ only by kernel rounding.
LOGPROB_TOLERANCE = 1e-3
PROMPTS = [
    "Hi",
    "What is the capital of France? Answer briefly.",
    "List three colours of the rainbow:",
    "The history of the sea: " + "waves come and go, tides rise and fall, ships sail far away. " * 8,
]

Status = Literal["pass", "FAIL", "skip"]


@dataclass
class Row:
    name: str
    status: Status
    detail: str
    seconds: float = 0.0


def _timed(name: str, check: Callable[[], str]) -> Row:
    """Run one check: its return value is the detail of a pass; an exception is a failure."""
    start = time.perf_counter()
    try:
        detail = check()
        status: Status = "pass"
    except Exception as error:  # a failed check is a row of the table, not the end of the run
        detail, status = f"{type(error).__name__}: {error}", "FAIL"
    return Row(name, status, detail, time.perf_counter() - start)


def _environment(device: str) -> str:
    import torch
    import transformers

    where = "cpu"
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.device(device))
        where = f"{props.name}, {props.total_memory / 2**30:.0f} GiB, CUDA {torch.version.cuda}"
    versions = f"torch {torch.__version__}, transformers {transformers.__version__}"
    return f"python {sys.version.split()[0]}, {versions}, {where}"


def _prompts(tokenizer) -> list[list[int]]:
    return [tokenizer(text, add_special_tokens=False)["input_ids"] for text in PROMPTS]


def _max_diff(a, b) -> float:
    import torch

    return float(
        (torch.as_tensor(a, dtype=torch.float64) - torch.as_tensor(b, dtype=torch.float64)).abs().max()
    )


async def _generate_all(engine, requests: list) -> list:
    await engine.start()
    try:
        return list(await asyncio.gather(*(engine.generate(r) for r in requests)))
    finally:
        await engine.shutdown()


def check_torch_engine(model_id: str, device: str) -> str:
    import torch

    from roll.engine.reference import forward_logprobs, greedy_generate
    from roll.engine.torch_engine import TorchEngine, TorchEngineConfig
    from roll.engine.types import GenerateRequest, SamplingParams
    from roll.models import load_model

    loaded = load_model(model_id, dtype=torch.float32, device=device)
    prompts = _prompts(loaded.tokenizer)
    engine = TorchEngine(loaded, TorchEngineConfig(prefill_chunk_tokens=32, max_batch_size=8))
    params = SamplingParams(temperature=0.0, max_new_tokens=NEW_TOKENS)

    requests = [
        GenerateRequest(request_id=f"g{i}", prompt_token_ids=p, params=params) for i, p in enumerate(prompts)
    ]
    results = asyncio.run(_generate_all(engine, requests))
    worst = 0.0
    for prompt, result in zip(prompts, results, strict=True):
        completion = result.completions[0]
        expected = greedy_generate(loaded, prompt, NEW_TOKENS)
        if completion.token_ids != expected:
            raise AssertionError(
                f"greedy tokens differ from transformers: {completion.token_ids} != {expected}"
            )
        reference = forward_logprobs(loaded, prompt, completion.token_ids)
        chosen = reference[torch.arange(len(completion.token_ids)), completion.token_ids]
        worst = max(worst, _max_diff(completion.logprobs, chosen))
    if worst > LOGPROB_TOLERANCE:
        raise AssertionError(
            f"engine logprobs differ from a forward pass by {worst:.2e} > {LOGPROB_TOLERANCE}"
        )
    tokens = sum(len(r.completions[0].token_ids) for r in results)
    return (
        f"{len(prompts)} prompts ({max(map(len, prompts))} tokens longest), {tokens} greedy tokens equal "
        f"transformers generate; logprobs max |diff| {worst:.1e} (tolerance {LOGPROB_TOLERANCE})"
    )


def check_torch_ipa_step(model_id: str, device: str) -> str:
    import torch

    from roll.algo.config import IPALossConfig
    from roll.algo.losses import build_loss
    from roll.engine.torch_engine import TorchEngine, TorchEngineConfig
    from roll.engine.types import GenerateRequest, SamplingParams
    from roll.models import load_model
    from roll.trainer.config import OptimizerConfig, TorchBackendConfig
    from roll.trainer.packing import pack_trajectories
    from roll.trainer.torch_backend import TorchBackend
    from roll.types import Chunk, Trajectory

    loaded = load_model(model_id, dtype=torch.float32, device=device)
    engine = TorchEngine(loaded, TorchEngineConfig(max_batch_size=8))
    prompts = _prompts(loaded.tokenizer)[:3]
    params = SamplingParams(temperature=1.0, max_new_tokens=NEW_TOKENS, seed=7, n=2)
    sampled = asyncio.run(
        _generate_all(
            engine,
            [
                GenerateRequest(request_id=f"s{i}", prompt_token_ids=p, params=params)
                for i, p in enumerate(prompts)
            ],
        )
    )
    trajectories = [
        Trajectory(
            chunks=[
                Chunk(context_ids=r.prompt_token_ids, output_ids=c.token_ids, output_logprobs=c.logprobs)
            ],
            reward=float(c.index == 0),
            group_id=r.request_id,
        )
        for r in sampled
        for c in r.completions
    ]
    batch = pack_trajectories(trajectories)
    mask = batch.loss_mask.bool()
    backend = TorchBackend(
        TorchBackendConfig(model=model_id, device=device, dtype="float32", optimizer=OptimizerConfig(lr=1e-3))
    )
    before = backend.logprobs(batch).cpu()[mask]
    diff_before = _max_diff(before, batch.engine_logprobs[mask])
    if diff_before > LOGPROB_TOLERANCE:
        raise AssertionError(f"trainer and engine logprobs differ by {diff_before:.2e} before the step")
    metrics = backend.train_step(batch, build_loss(IPALossConfig(group_baseline=True)))
    if not all(torch.isfinite(torch.tensor(float(v))) for v in metrics.values()):
        raise AssertionError(f"non-finite train metrics: {metrics}")
    moved = _max_diff(backend.logprobs(batch).cpu()[mask], before)
    if moved == 0.0:
        raise AssertionError("the IPA step did not change the logprobs of the trained tokens")
    weights = backend.state_dict_for_inference()

    async def sync_then_generate() -> list:
        await engine.start()
        try:
            await engine.update_weights(weights.state_dict, weights.version)
        finally:
            await engine.shutdown()
        greedy = SamplingParams(temperature=0.0, max_new_tokens=2)
        return await _generate_all(
            engine, [GenerateRequest(request_id="v", prompt_token_ids=prompts[0], params=greedy)]
        )

    after_sync = asyncio.run(sync_then_generate())
    if after_sync[0].weight_version != weights.version:
        raise AssertionError(
            f"engine result carries version {after_sync[0].weight_version}, not {weights.version}"
        )
    synced = loaded.model.state_dict()
    drift = max(_max_diff(synced[name].cpu(), tensor.cpu()) for name, tensor in weights.state_dict.items())
    if drift > 0:
        raise AssertionError(f"engine weights differ from the trainer's by {drift:.2e} after the sync")
    loss = metrics.get("loss", float("nan"))
    return (
        f"{batch.num_trajectories} sampled trajectories, {int(mask.sum())} trained tokens; trainer vs engine "
        f"logprobs max |diff| {diff_before:.1e}; loss {loss:.4f}; logprobs moved up to {moved:.2e}; engine "
        f"serves version {weights.version} with the trainer's exact weights"
    )


def _external_rows(
    prefix: str, module: str, package: str, device: str, run: Callable[..., list]
) -> list[Row]:
    """Rows of another module's `run_checks()`: (name, ok, detail) tuples; ok None is a skip (detail: why)."""
    start = time.perf_counter()
    try:
        results = run()
    except Exception as error:
        return [
            Row(
                prefix,
                "FAIL",
                f"{module}.run_checks raised {type(error).__name__}: {error}",
                time.perf_counter() - start,
            )
        ]
    seconds = (time.perf_counter() - start) / max(len(results), 1)
    return [
        Row(f"{prefix}: {name}", "skip" if ok is None else ("pass" if ok else "FAIL"), detail, seconds)
        for name, ok, detail in results
    ]


def megatron_rows(device: str) -> list[Row]:
    module = "roll.trainer.megatron.gpu_check"
    if not device.startswith("cuda"):
        return [Row("megatron", "skip", "megatron-core runs on CUDA only (device is cpu)")]
    if importlib.util.find_spec("megatron") is None or importlib.util.find_spec("megatron.core") is None:
        return [Row("megatron", "skip", "megatron-core is not installed (scripts/gpu_wheels.sh carries it)")]
    if importlib.util.find_spec(module) is None:
        return [Row("megatron", "skip", f"{module} is not in this checkout")]
    try:
        checks = importlib.import_module(module)
    except Exception as error:
        return [Row("megatron", "FAIL", f"import {module}: {type(error).__name__}: {error}")]
    return _external_rows("megatron", module, "megatron-core", device, checks.run_checks)


def sglang_rows(model_id: str) -> list[Row]:
    from roll.engine.sglang.runtime import sglang_unavailable_reason

    reason = sglang_unavailable_reason()
    if reason is not None:
        return [Row("sglang", "skip", reason)]
    from roll.engine.sglang import gpu_check
    from roll.trainer.megatron.weight_sync import init_weight_group

    return _external_rows(
        "sglang",
        gpu_check.__name__,
        "sglang",
        "cuda",
        lambda: gpu_check.run_checks(model_id, init_weight_group),
    )


def run_checks(device: str, model_id: str) -> list[Row]:
    rows = [
        _timed("environment", lambda: _environment(device)),
        _timed("torch engine: greedy = transformers", lambda: check_torch_engine(model_id, device)),
        _timed("torch trainer: IPA step + weight sync", lambda: check_torch_ipa_step(model_id, device)),
    ]
    rows += megatron_rows(device)
    rows += sglang_rows(model_id)  # last: SGLang's shutdown ends every child process of this one
    return rows


def print_table(rows: list[Row], device: str, model_id: str) -> None:
    from rich.console import Console
    from rich.table import Table

    from rock.sdk.tables import print_table as show_table

    table = Table(title=f"ALE GPU check on {device} with {model_id}")
    table.add_column("check")
    table.add_column("result")
    table.add_column("s", justify="right")
    table.add_column("detail", overflow="fold")
    colours = {"pass": "green", "FAIL": "bold red", "skip": "yellow"}
    for row in rows:
        table.add_row(row.name, f"[{colours[row.status]}]{row.status}[/]", f"{row.seconds:.1f}", row.detail)
    show_table(Console(), table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m roll.gpu_check", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--device", default=os.environ.get(DEVICE_ENV), help="cuda (default when available) or cpu"
    )
    parser.add_argument("--model", default=DEFAULT_MODEL, help="builtin id or Hugging Face folder")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args(argv)
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        print(f"--device {device}: torch sees no CUDA device; run with --device cpu", file=sys.stderr)
        return 2
    rows = run_checks(device, args.model)
    print_table(rows, device, args.model)
    summary = {"device": device, "model": args.model, "rows": [asdict(row) for row in rows]}
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(summary, handle, indent=2)
    print(json.dumps(summary))
    return 1 if any(row.status == "FAIL" for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
