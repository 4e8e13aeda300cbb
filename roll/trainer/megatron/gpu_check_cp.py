"""The context parallel row of the Megatron GPU check, run on two GPUs (one CP rank each).

`python -m torch.distributed.run --nproc-per-node 2 -m roll.trainer.megatron.gpu_check_cp OUT` builds
builtin:tiny-qwen3-moe with context_parallel_size 2 in bfloat16 (Transformer Engine's attention), takes the
logprobs of the GPU check's batch and one IPA step, and rank 0 writes them to OUT (torch.save).
`gpu_check.context_parallel_row` starts it and compares with the same on one GPU without CP. NCCL refuses
two ranks on one GPU, so the row needs two.
"""

from __future__ import annotations

import sys

import torch
import torch.distributed as dist


def main(out: str) -> None:
    from roll.algo.config import IPALossConfig
    from roll.algo.losses import build_loss
    from roll.trainer.megatron.backend import MegatronBackend
    from roll.trainer.megatron.gpu_check import cp_config, gpu_check_batch

    backend = MegatronBackend(cp_config(2))
    batch = gpu_check_batch()
    logprobs = backend.logprobs(batch)
    step = backend.train_step(batch, build_loss(IPALossConfig()))
    if dist.get_rank() == 0:
        torch.save({"logprobs": logprobs, "loss": step["loss"]}, out)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
