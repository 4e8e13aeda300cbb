"""Train backends: the `TrainBackend` protocol and the embedded torch implementation.

`roll.trainer.config` (pydantic, importable without torch) holds the backend config;
`roll.trainer.torch_backend.TorchBackend` runs it on a transformers model (CPU or GPU; FSDP2 across
processes).
"""
