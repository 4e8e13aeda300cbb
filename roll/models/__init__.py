"""Model registry: builtin and on-disk models, loaded with their tokenizer and chat template."""

from roll.models.cache import model_cache_dir
from roll.models.registry import (
    LoadedModel,
    ModelNotFoundError,
    available_models,
    load_model,
    resolve_model_path,
)

__all__ = [
    "LoadedModel",
    "ModelNotFoundError",
    "available_models",
    "load_model",
    "model_cache_dir",
    "resolve_model_path",
]
