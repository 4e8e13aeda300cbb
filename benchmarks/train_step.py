"""Packed (padding-free) against padded training steps on an agentic length mix, in one run.

Both modes run the same TorchBackend code on the same batch, micro-batches and loss (IPA); the only change
is `packing`: one row with position ids restarting per sequence, or every sequence of a micro-batch
right-padded to the longest. Throughput counts real tokens only. The mix: many short multi-turn trajectories
(chunks sharing one sequence) and a few long ones, as agent rollouts look.

    python benchmarks/train_step.py [--steps 3] [--device cpu] [--model builtin:smollm2-135m-instruct]

Prints both throughputs, the ratio, and a final JSON line.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from roll.algo.config import IPALossConfig
from roll.algo.losses import build_loss
from roll.models import load_model
from roll.trainer.config import OptimizerConfig, TorchBackendConfig
from roll.trainer.micro_batches import plan_micro_batches
from roll.trainer.torch_backend import TorchBackend
from roll.types import Chunk, Trajectory, pack_trajectories


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


def padded_tokens(batch, budget: int) -> int:
    """Token slots the padded baseline computes: rows x longest sequence, summed over micro-batches."""
    total = 0
    for start, end in plan_micro_batches(batch, budget):
        lengths = batch.slice_trajectories(start, end).seq_lens
        total += lengths.numel() * int(lengths.max())
    return total


def measure(args: argparse.Namespace, packing: bool, batch) -> float:
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
    loss = build_loss(IPALossConfig())
    for _ in range(args.warmup):  # allocator, kernels
        backend.train_step(batch, loss)
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(args.steps):
        backend.train_step(batch, loss)
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    return batch.num_tokens * args.steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="builtin:smollm2-135m-instruct")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--short", type=int, default=14, help="short multi-turn trajectories")
    parser.add_argument("--long", type=int, default=2, help="long trajectories")
    parser.add_argument("--micro-batch-tokens", type=int, default=4096)
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps first")
    parser.add_argument("--activation-checkpointing", action="store_true", help="in both modes")
    args = parser.parse_args()

    vocab = load_model(args.model, device="cpu").tokenizer.vocab_size
    batch = pack_trajectories(agentic_mix(vocab, args.short, args.long, seed=0))
    lengths = batch.seq_lens.float()
    print(
        f"batch: {batch.num_tokens} tokens in {lengths.numel()} sequences "
        f"(median {lengths.median():.0f}, max {lengths.max():.0f}), {batch.num_chunks} chunks"
    )
    slots = padded_tokens(batch, args.micro_batch_tokens)
    overhead = slots / batch.num_tokens
    print(f"padded baseline computes {slots} token slots for {batch.num_tokens} tokens ({overhead:.2f}x)")
    packed = measure(args, True, batch)
    print(f"packed: {packed:,.1f} tokens/s")
    padded = measure(args, False, batch)
    print(f"padded: {padded:,.1f} tokens/s")
    ratio = packed / padded
    print(f"packed / padded = {ratio:.2f}x (goal >= 1.5x)")
    print(
        json.dumps(
            {
                "benchmark": "train_step",
                "model": args.model,
                "device": args.device,
                "tokens_per_step": batch.num_tokens,
                "sequences": lengths.numel(),
                "padded_token_slots": slots,
                "micro_batch_tokens": args.micro_batch_tokens,
                "steps": args.steps,
                "packed_tokens_per_s": round(packed, 1),
                "padded_tokens_per_s": round(padded, 1),
                "ratio": round(ratio, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
