"""Megatron-core train backend (extra `gpu`): Hugging Face models on megatron-core with TP/PP/EP/CP.

`config` imports without torch; `mapping` converts weights between Hugging Face and Megatron names and
layouts (torch only); `model` builds the megatron-core GPT model; `backend.MegatronBackend` implements
`roll.trainer.protocol.TrainBackend` and needs CUDA.
"""
