"""Worker of test_trainer_fsdp: one rank of a two-process FSDP2 run (gloo, CPU). Not a test module.

Run by torch.distributed.run: builds the seeded tiny model, takes one IPA step on the shared batch,
writes the updated full weights and the metrics (rank 0) to the path given as argv[1] and exports the model
as a Hugging Face folder to argv[2].
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from roll.algo.config import IPALossConfig
from roll.algo.losses import build_loss
from roll.trainer.config import OptimizerConfig, TorchBackendConfig
from roll.trainer.packing import pack_trajectories
from roll.trainer.torch_backend import TorchBackend
from roll.types import Chunk, Trajectory


def tiny_llama() -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )
    config._attn_implementation = "sdpa"
    return LlamaForCausalLM(config)


def trajectories() -> list[Trajectory]:
    gen = torch.Generator().manual_seed(7)
    out = []
    for i in range(5):  # five micro-batches over two ranks: rank 1 makes one idle pass
        context = torch.randint(1, 64, (4 + i,), generator=gen).tolist()
        output = torch.randint(1, 64, (3,), generator=gen).tolist()
        chunk = Chunk(context_ids=context, output_ids=output, output_logprobs=[-4.0, -4.1, -4.2])
        out.append(Trajectory(chunks=[chunk], reward=1.0 if i % 2 else -1.0, group_id=str(i // 2)))
    return out


def run_step(export_dir: Path, lr: float = 1e-3) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
    """One IPA step, then the trained model exported to `export_dir`; returns full weights and metrics."""
    config = TorchBackendConfig(micro_batch_tokens=1, optimizer=OptimizerConfig(lr=lr))
    backend = TorchBackend(config, model=tiny_llama())
    loss = build_loss(IPALossConfig(group_baseline=True, mismatch_high=100.0))
    metrics = backend.train_step(pack_trajectories(trajectories()), loss)
    backend.export_hf(export_dir)
    return backend.state_dict_for_inference().state_dict, metrics


def main() -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo")
    weights, metrics = run_step(Path(sys.argv[2]))
    if dist.get_rank() == 0:
        torch.save({"weights": weights, "metrics": metrics}, sys.argv[1])
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
