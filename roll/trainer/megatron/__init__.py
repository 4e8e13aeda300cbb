"""Megatron-core train backend (extra `gpu`): Hugging Face models on megatron-core with TP/PP/EP/CP.

- `config`: `MegatronBackendConfig` and its layout check against a model (imports without torch);
- `mapping`: HF checkpoint <-> Megatron parameter names and layouts (whole tensors);
- `sharding`: whole Megatron tensors <-> one rank's pieces under a tensor/pipeline/expert layout;
- `model`: megatron-core TransformerConfig and GPTModel (local layer spec; Transformer Engine's core
  attention under context parallelism) from a HF config;
- `attention`: per-sequence causal attention over packed rows (the spec's core attention without CP);
- `context_parallel`: each context parallel rank's share of a packed row (TE's THD split) and the
  gather of per-token values back into token order;
- `weights`: load a HF folder into this rank's shard, gather shards into HF-named buckets, write HF folders;
- `forward`: packed micro-batches as model inputs (THD), per-token logprobs from vocab-parallel logits;
- `weight_sync`: the trainer's side of `weight_update: distributed` (weights group with SGLang engines, the
  tensor specs they receive, broadcast of the gathered buckets from rank 0);
- `checkpoint`: per-rank checkpoints (parameters, optimizer, RNG) and their layout check;
- `backend`: `MegatronBackend`, the `TrainBackend` (needs CUDA; every method is collective over ranks);
- `gpu_check`: `run_checks()` for scripts/gpu_check.sh; `gpu_check_cp`: its two-GPU context parallel ranks.
"""
