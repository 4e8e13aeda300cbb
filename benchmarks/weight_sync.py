"""Weight sync through Ray's object store: the state dict as numpy arrays (what `ObjectStoreSync` sends now)
against the same state dict as torch tensors (what it sent before), in one run.

The trainer puts the builtin model's full float32 state dict (as `TrainerActor.weights` does) and an engine
actor in another process takes it and copies it into its own model (as `load_into` does). Timed in rounds that
alternate which goes first: the put in the trainer's process, and the engine's take-and-copy.

    python benchmarks/weight_sync.py [--rounds 4] [--model builtin:smollm2-135m-instruct]

Prints both, the ratio and a final JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Mapping

import numpy as np
import ray
import torch

from roll.models import load_model
from roll.pipeline.weight_sync.object_store import from_object_store, to_object_store


@ray.remote
class Engine:
    def __init__(self, model_id: str) -> None:
        torch.set_num_threads(1)
        self.model = load_model(model_id, dtype=torch.float32, device="cpu").model

    def take(self, state: Mapping[str, torch.Tensor | np.ndarray]) -> float:
        """Seconds to make tensors of what arrived and copy them into the model (the arrival itself is timed
        by the caller, around the whole call)."""
        started = time.perf_counter()
        targets = dict(self.model.named_parameters(remove_duplicate=False))
        with torch.no_grad():
            for name, tensor in from_object_store(state).items():
                if name in targets:
                    targets[name].copy_(tensor)
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="builtin:smollm2-135m-instruct")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    torch.set_num_threads(1)
    state = {k: v.detach() for k, v in load_model(args.model, dtype=torch.float32).model.state_dict().items()}
    megabytes = sum(t.numel() * t.element_size() for t in state.values()) / 1e6
    engine = Engine.remote(args.model)
    ray.get(engine.take.remote({}))
    ways = {"arrays": lambda: to_object_store(state), "tensors": lambda: state}
    put: dict[str, list[float]] = {name: [] for name in ways}
    take: dict[str, list[float]] = {name: [] for name in ways}
    for round_number in range(args.rounds):
        order = list(ways.items())
        for name, payload in order if round_number % 2 == 0 else order[::-1]:
            started = time.perf_counter()
            ref = ray.put(payload())
            put[name].append(time.perf_counter() - started)
            started = time.perf_counter()
            ray.get(engine.take.remote(ref))
            take[name].append(time.perf_counter() - started)
            del ref
    ray.shutdown()
    ms = {
        f"{kind}_{name}_s": statistics.median(times[name])
        for kind, times in (("put", put), ("take", take))
        for name in ways
    }
    ours = ms["put_arrays_s"] + ms["take_arrays_s"]
    baseline = ms["put_tensors_s"] + ms["take_tensors_s"]
    load = os.getloadavg()[0]
    print(f"state dict {megabytes:.0f} MB, median of {args.rounds} rounds")
    print(f"  put : arrays {ms['put_arrays_s']:.2f} s, tensors {ms['put_tensors_s']:.2f} s")
    print(f"  take: arrays {ms['take_arrays_s']:.2f} s, tensors {ms['take_tensors_s']:.2f} s")
    print(f"  sync: arrays {ours:.2f} s, tensors {baseline:.2f} s ({baseline / ours:.1f}x)")
    print(f"  load average {load:.2f}")
    print(
        json.dumps(
            {
                "megabytes": round(megabytes),
                **{k: round(v, 3) for k, v in ms.items()},
                "ratio": round(baseline / ours, 2),
                "load": load,
            }
        )
    )


if __name__ == "__main__":
    main()
