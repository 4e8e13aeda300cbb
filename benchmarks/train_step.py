"""Packed (padding-free) against padded training steps on an agentic length mix, in one run.

Both modes run the same TorchBackend code on the same batch and loss (IPA), with the same micro-batch token
budget, each in its natural way:
- packed: micro-batches of whole trajectories up to the budget in real tokens, one row per micro-batch with
  position ids restarting per sequence and per-sequence (varlen) attention;
- padded: as a Hugging Face Trainer with a padding collator would run it: micro-batches formed in data order
  up to the budget in padded slots (sequences x longest), each sequence right-padded to the micro-batch's
  longest, sdpa attention with a padding mask.
Throughput counts real tokens only. The mix: many short multi-turn trajectories (chunks sharing one
sequence) and a few long ones, shuffled, as agent rollouts look. A warm-up step on the first trajectory
(optimizer state, allocator) runs untimed; timed steps of the two modes alternate, so that load from other
processes on a shared machine falls on both alike (process CPU time is reported too).

    python benchmarks/train_step.py [--steps 1] [--device cpu] [--model builtin:smollm2-135m-instruct]

Prints both throughputs, the ratio, and a final JSON line.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from roll.algo.batch import PackedBatch
from roll.algo.config import IPALossConfig
from roll.algo.losses import build_loss
from roll.models import load_model
from roll.trainer.config import OptimizerConfig, TorchBackendConfig
from roll.trainer.micro_batches import plan_micro_batches
from roll.trainer.packing import pack_trajectories
from roll.trainer.torch_backend import TorchBackend
from roll.types import Chunk, Trajectory


def agentic_mix(vocab: int, short: int, long: int, seed: int) -> list[Trajectory]:
    """`short` trajectories of 2-4 turns (~150-600 tokens) and `long` ones of ~1,500 tokens, shuffled."""
    gen = torch.Generator().manual_seed(seed)

    def ids(low: int, high: int) -> list[int]:
        n = int(torch.randint(low, high + 1, (1,), generator=gen))
        return torch.randint(0, vocab, (n,), generator=gen).tolist()

    def trajectory(
        turns: int, prompt: tuple[int, int], obs: tuple[int, int], out: tuple[int, int]
    ) -> Trajectory:
        context, chunks = ids(*prompt), []
        for _ in range(turns):
            output = ids(*out)
            chunks.append(Chunk(context_ids=context, output_ids=output, output_logprobs=[-1.0] * len(output)))
            context = context + output + ids(*obs)
        return Trajectory(chunks=chunks, reward=float(torch.rand(1, generator=gen)) - 0.5)

    trajectories = [
        trajectory(int(torch.randint(2, 5, (1,), generator=gen)), (48, 160), (16, 96), (12, 64))
        for _ in range(short)
    ]
    trajectories += [trajectory(6, (400, 600), (100, 200), (40, 100)) for _ in range(long)]
    order = torch.randperm(len(trajectories), generator=gen).tolist()
    return [trajectories[i] for i in order]


def padded_slots(batch: PackedBatch, budget: int) -> tuple[int, int]:
    """Token slots the padded baseline computes (rows x longest, summed) and its number of micro-batches."""
    plan = plan_micro_batches(batch, budget, padded=True)
    total = 0
    for start, end in plan:
        lengths = batch.slice_trajectories(start, end).seq_lens
        total += lengths.numel() * int(lengths.max())
    return total, len(plan)


def warm_backend(args: argparse.Namespace, packing: bool, batch: PackedBatch) -> TorchBackend:
    """A backend on a fresh copy of the model, after `args.warmup` untimed steps on one trajectory."""
    loaded = load_model(args.model, device=args.device)
    config = TorchBackendConfig(
        model=args.model,
        device=args.device,
        packing=packing,
        micro_batch_tokens=args.micro_batch_tokens,
        activation_checkpointing=args.activation_checkpointing,
        optimizer=OptimizerConfig(lr=1e-6),
        compute_entropy=False,
    )
    backend = TorchBackend(config, model=loaded.model, tokenizer=loaded.tokenizer)
    for _ in range(args.warmup):
        backend.train_step(batch.slice_trajectories(0, 1), build_loss(IPALossConfig()))
    return backend


def timed_step(backend: TorchBackend, batch: PackedBatch) -> tuple[float, float]:
    """Wall-clock and process CPU seconds of one train step."""
    sync = torch.cuda.synchronize if backend.device.type == "cuda" else lambda: None
    sync()
    wall, cpu = time.perf_counter(), time.process_time()
    backend.train_step(batch, build_loss(IPALossConfig()))
    sync()
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="builtin:smollm2-135m-instruct")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--steps", type=int, default=1, help="timed steps per mode, alternating")
    parser.add_argument("--short", type=int, default=14, help="short multi-turn trajectories")
    parser.add_argument("--long", type=int, default=2, help="long trajectories")
    parser.add_argument("--micro-batch-tokens", type=int, default=4096)
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps on one trajectory first")
    parser.add_argument(
        "--activation-checkpointing",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="in both modes (on by default: two models train side by side on a shared 24 GB machine)",
    )
    args = parser.parse_args()

    vocab = load_model(args.model, device="cpu").tokenizer.vocab_size
    batch = pack_trajectories(agentic_mix(vocab, args.short, args.long, seed=0))
    lengths = batch.seq_lens.float()
    print(
        f"batch: {batch.num_tokens} tokens in {lengths.numel()} sequences "
        f"(median {lengths.median():.0f}, max {lengths.max():.0f}), {batch.num_chunks} chunks"
    )
    slots, padded_micro = padded_slots(batch, args.micro_batch_tokens)
    packed_micro = len(plan_micro_batches(batch, args.micro_batch_tokens))
    overhead = slots / batch.num_tokens
    print(
        f"budget {args.micro_batch_tokens} tokens: packed {packed_micro} micro-batches; padded "
        f"{padded_micro} micro-batches computing {slots} slots ({overhead:.2f}x the real tokens)"
    )
    backends = {"packed": warm_backend(args, True, batch), "padded": warm_backend(args, False, batch)}
    wall = {name: 0.0 for name in backends}
    cpu = {name: 0.0 for name in backends}
    for step in range(args.steps):  # alternate the modes so load from other processes hits both alike
        for name, backend in backends.items():
            step_wall, step_cpu = timed_step(backend, batch)
            wall[name] += step_wall
            cpu[name] += step_cpu
            print(f"step {step + 1} {name}: {batch.num_tokens / step_wall:,.1f} tokens/s")
    packed, padded = (batch.num_tokens * args.steps / wall[name] for name in ("packed", "padded"))
    ratio = packed / padded
    cpu_ratio = cpu["padded"] / cpu["packed"]
    print(f"packed: {packed:,.1f} tokens/s, padded: {padded:,.1f} tokens/s")
    print(f"packed / padded = {ratio:.2f}x (goal >= 1.5x); in process CPU time {cpu_ratio:.2f}x")
    print(
        json.dumps(
            {
                "benchmark": "train_step",
                "model": args.model,
                "device": args.device,
                "tokens_per_step": batch.num_tokens,
                "sequences": lengths.numel(),
                "padded_token_slots": slots,
                "packed_micro_batches": packed_micro,
                "padded_micro_batches": padded_micro,
                "micro_batch_tokens": args.micro_batch_tokens,
                "steps": args.steps,
                "activation_checkpointing": args.activation_checkpointing,
                "packed_tokens_per_s": round(packed, 1),
                "padded_tokens_per_s": round(padded, 1),
                "ratio": round(ratio, 3),
                "cpu_time_ratio": round(cpu_ratio, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
