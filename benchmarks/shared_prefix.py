"""Train steps with a micro-batch's common start computed once, against every sequence computed whole.

The batches are the main job's own teacher conversations (the data stage's sft.jsonl: iflow's shell profile,
its system prompt and tool schema, the generated tasks), tokenized as `roll sft` tokenizes them:
- sft: 8 conversations as SFT's first batch draws them (the sequences share the system prompt and tools);
- groups: an RL step's shape, 2 groups of 4 episodes that share their task's first prompt and then go their
  own ways. The data stage keeps one way per task (its two attempts are the same), so each member takes the
  later turns of a different task of the family, after the group's first prompt: real lengths and tokens,
  answers that do not fit the task (which changes no cost).
Both modes run TorchBackend.train_step with the main job's trainer settings (bf16 autocast, 2048-token
micro-batches, IPA with a KL to a reference model, so each step is a reference forward, a forward and a
backward); they differ only in `trainer.shared_prefix_tokens` (32, the default, against 0). Timed steps of
the two modes alternate so that load from other processes falls on both alike; one untimed step each first.

    python benchmarks/shared_prefix.py [--data .ale/datasets/KEY/sft.jsonl] [--steps 2]

Prints the tokens each mode computes, both throughputs, the ratio, and a final JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import torch

from roll.algo.batch import PackedBatch
from roll.algo.config import IPALossConfig
from roll.algo.losses import build_loss
from roll.models import load_model
from roll.sft.data import SFTExample, read_examples, to_trajectory
from roll.sft.train import batch_order
from roll.trainer.config import OptimizerConfig, TorchBackendConfig
from roll.trainer.forward import shared_tokens
from roll.trainer.micro_batches import plan_micro_batches
from roll.trainer.packing import pack_trajectories
from roll.trainer.torch_backend import TorchBackend
from roll.types import Trajectory

MODEL = "builtin:smollm2-135m-instruct"
BUDGET = 2048


def newest_sft_data() -> Path:
    found = sorted(Path(".ale/datasets").glob("*/sft.jsonl"), key=lambda p: p.stat().st_mtime)
    if not found:
        raise SystemExit(
            "no .ale/datasets/*/sft.jsonl here: run the main job's data stage first "
            "(roll train configs/ipa.yaml), or pass --data FILE"
        )
    return found[-1]


def batches(data: Path, tokenizer: Any) -> dict[str, PackedBatch]:
    examples = read_examples(data)

    def packed(picked: list[Trajectory]) -> PackedBatch:
        # Rewards of +-1 by turns: the loss has something to push on; the cost does not depend on it.
        scored = [
            t.model_copy(update={"reward": 1.0 if i % 2 else -1.0, "group_id": f"g{i // 4}"})
            for i, t in enumerate(picked)
        ]
        return pack_trajectories(scored)

    first_sft_batch = batch_order(len(examples), 8, epoch=0, seed=0)[0]
    sft = [to_trajectory(examples[i], tokenizer) for i in first_sft_batch]
    by_family: dict[str, list[SFTExample]] = {}
    for example in examples[::2]:  # one of the two identical attempts of each task
        by_family.setdefault(str((example.model_extra or {}).get("family")), []).append(example)
    groups = []
    for family in list(by_family.values())[:2]:
        task = family[0].messages[1]
        for member in family[:4]:
            messages = [member.messages[0], task, *member.messages[2:]]
            groups.append(to_trajectory(member.model_copy(update={"messages": messages}), tokenizer))
    return {"sft": packed(sft), "groups": packed(groups)}


def computed_tokens(batch: PackedBatch, shared_prefix: int) -> tuple[int, int]:
    """Tokens the forward computes, and the number of micro-batches, under the backend's own plan."""
    plan = plan_micro_batches(batch, BUDGET, shared_prefix=shared_prefix)
    total = 0
    for start, end in plan:
        part = batch.slice_trajectories(start, end)
        total += part.num_tokens - shared_tokens(
            part.input_ids, part.position_ids, part.seq_lens, shared_prefix
        )
    return total, len(plan)


def backend(shared_prefix: int) -> TorchBackend:
    loaded = load_model(MODEL)
    config = TorchBackendConfig(
        model=MODEL,
        dtype="bfloat16",
        micro_batch_tokens=BUDGET,
        shared_prefix_tokens=shared_prefix,
        optimizer=OptimizerConfig(lr=1e-7),
    )
    return TorchBackend(config, model=loaded.model, tokenizer=loaded.tokenizer)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=None, help="an SFT jsonl (default: the newest cached)")
    parser.add_argument("--steps", type=int, default=2, help="timed steps per mode and batch, alternating")
    args = parser.parse_args()
    torch.set_num_threads(1)  # as the main job's trainer runs (resources.trainer_threads: 1)
    data = args.data or newest_sft_data()
    tokenizer = load_model(MODEL).tokenizer
    loss = build_loss(IPALossConfig(kl_coef=0.5, group_baseline=True))
    modes = {"shared": 32, "whole": 0}
    backends = {name: backend(shared) for name, shared in modes.items()}
    results: dict[str, dict[str, float]] = {}
    print(f"data: {data}; load average {os.getloadavg()[0]:.2f} before")
    for shape, batch in batches(data, tokenizer).items():
        wall = dict.fromkeys(modes, 0.0)
        for name in modes:
            backends[name].train_step(batch, loss)  # untimed: allocator, optimizer state
        for _ in range(args.steps):
            for name, trainer in backends.items():
                tick = time.perf_counter()
                trainer.train_step(batch, loss)
                wall[name] += time.perf_counter() - tick
        computed = {name: computed_tokens(batch, shared) for name, shared in modes.items()}
        ratio = wall["whole"] / wall["shared"]
        for name in modes:
            tokens, micro = computed[name]
            print(
                f"{shape} {name}: {batch.num_tokens} tokens, {tokens} computed in {micro} micro-batches, "
                f"{wall[name] / args.steps:.1f} s a step"
            )
        print(f"{shape}: shared / whole = {ratio:.2f}x faster")
        results[shape] = {
            "tokens": batch.num_tokens,
            "computed_shared": computed["shared"][0],
            "computed_whole": computed["whole"][0],
            "step_s_shared": round(wall["shared"] / args.steps, 2),
            "step_s_whole": round(wall["whole"] / args.steps, 2),
            "ratio": round(ratio, 3),
        }
    print(
        json.dumps(
            {"benchmark": "shared_prefix", "steps": args.steps, "load_after": round(os.getloadavg()[0], 2)}
            | results
        )
    )


if __name__ == "__main__":
    main()
