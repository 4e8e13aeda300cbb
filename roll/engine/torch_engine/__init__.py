"""The embedded torch inference engine: continuous batching over a transformers causal LM."""

from roll.engine.torch_engine.config import TorchEngineConfig
from roll.engine.torch_engine.engine import TorchEngine

__all__ = ["TorchEngine", "TorchEngineConfig"]
