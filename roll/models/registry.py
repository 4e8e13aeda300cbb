"""Resolve a model id (a builtin name or a folder on disk) to a loaded model and tokenizer."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from roll.models.builtin import BUILTIN_MODELS, BUILTIN_PREFIX
from roll.models.cache import is_model_folder

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")


class ModelNotFoundError(ValueError):
    """A model id that is neither a builtin nor a Hugging Face model folder."""


@dataclass
class LoadedModel:
    """A model ready for inference or training, with everything needed to talk to it."""

    model_id: str
    path: Path
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    max_context: int


def available_models() -> list[str]:
    """The builtin ids; any Hugging Face model folder on disk works too."""
    return [BUILTIN_PREFIX + name for name in BUILTIN_MODELS]


def _not_found(model_id: str, why: str) -> ModelNotFoundError:
    return ModelNotFoundError(
        f"Unknown model {model_id!r}: {why}. Use one of {', '.join(available_models())} "
        "or the path of a Hugging Face model folder (config.json and *.safetensors); nothing is downloaded."
    )


def resolve_model_path(model_id: str) -> Path:
    """The Hugging Face folder behind `model_id`, building a builtin one into the cache if needed."""
    if model_id.startswith(BUILTIN_PREFIX):
        build = BUILTIN_MODELS.get(model_id.removeprefix(BUILTIN_PREFIX))
        if build is None:
            raise _not_found(model_id, "no builtin model has that name")
        return build()
    path = Path(model_id).expanduser()
    if not path.exists():
        raise _not_found(model_id, "it is not a builtin id and no such folder exists")
    if not is_model_folder(path):
        raise _not_found(model_id, f"{path} is not a model folder (needs config.json and weights)")
    return path.resolve()


def load_model(model_id: str, *, dtype: torch.dtype | None = None, device: str = "cpu") -> LoadedModel:
    """Load `model_id` (default dtype float32) in eval mode on `device`, with its tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = resolve_model_path(model_id)
    # transformers would otherwise build an empty tokenizer from the config's model type.
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        raise _not_found(model_id, f"{path} has no usable tokenizer (none of {', '.join(TOKENIZER_FILES)})")
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype or torch.float32).to(device).eval()
    return LoadedModel(
        model_id=model_id,
        path=path,
        model=model,
        tokenizer=tokenizer,
        max_context=int(model.config.max_position_embeddings),
    )
