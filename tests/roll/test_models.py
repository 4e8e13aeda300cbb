"""The model registry: builtin conversion and caching, the tiny MoE's seeding, folders and errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from roll.models import LoadedModel, ModelNotFoundError, available_models, load_model, model_cache_dir
from roll.models.builtin import TINY_MOE_FOLDER, smollm2_folder, tiny_qwen3_moe_folder
from roll.models.cache import CACHE_ENV, ensure_cached_folder


@pytest.mark.slow
def test_smollm2_converted_folder_is_a_plain_model_that_answers(smollm2: LoadedModel) -> None:
    folder = smollm2.path
    assert folder.parent == model_cache_dir()
    assert (folder / "model.safetensors").is_file()
    assert (folder / "tokenizer.json").is_file()
    assert "<|im_start|>" in smollm2.tokenizer.chat_template
    assert not [p for p in folder.parent.iterdir() if ".partial-" in p.name]
    assert smollm2.max_context == 8192
    assert not smollm2.model.training
    assert next(smollm2.model.parameters()).dtype == torch.float32

    tok = smollm2.tokenizer
    text = tok.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}],
        add_generation_prompt=True,
        tokenize=False,
    )
    ids = tok(text, add_special_tokens=False, return_tensors="pt").input_ids
    out = smollm2.model.generate(ids, max_new_tokens=8, do_sample=False)
    assert "Paris" in tok.decode(out[0, ids.shape[1] :])


def test_converted_smollm2_can_be_saved_again(smollm2: LoadedModel, tmp_path: Path) -> None:
    # Trainers export it (SFT warm start, export_hf): a leftover GGUF quantization entry would refuse that.
    assert "quantization_config" not in json.loads((smollm2.path / "config.json").read_text())
    smollm2.model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").exists()


def test_builtin_is_converted_once(smollm2: LoadedModel) -> None:
    weights = smollm2.path / "model.safetensors"
    before = weights.stat().st_mtime_ns
    assert smollm2_folder() == smollm2.path
    assert weights.stat().st_mtime_ns == before


def test_tiny_moe_is_deterministic_by_seed(
    tiny_moe: LoadedModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert type(tiny_moe.model).__name__ == "Qwen3MoeForCausalLM"
    assert tiny_moe.model.config.num_experts > tiny_moe.model.config.num_experts_per_tok > 1
    assert tiny_moe.model.config.vocab_size == len(tiny_moe.tokenizer)

    # Rebuild in a fresh cache (borrowing the converted SmolLM2 for its tokenizer) and compare weights.
    fresh = tmp_path / "cache"
    fresh.mkdir()
    (fresh / smollm2_folder().name).symlink_to(smollm2_folder())
    monkeypatch.setenv(CACHE_ENV, str(fresh))
    again = tiny_qwen3_moe_folder(seed=0)
    other_seed = tiny_qwen3_moe_folder(seed=1)
    assert again == fresh / TINY_MOE_FOLDER.format(seed=0)

    original = load_file(tiny_moe.path / "model.safetensors")
    rebuilt = load_file(again / "model.safetensors")
    reseeded = load_file(other_seed / "model.safetensors")
    assert original.keys() == rebuilt.keys()
    assert all(torch.equal(original[k], rebuilt[k]) for k in original)
    assert not all(torch.equal(original[k], reseeded[k]) for k in original)


def test_cache_build_is_atomic_and_happens_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    builds: list[Path] = []

    def crashing_build(folder: Path) -> None:
        (folder / "config.json").write_text("{}")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        ensure_cached_folder("m", crashing_build)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".m.lock"]

    def build(folder: Path) -> None:
        builds.append(folder)
        (folder / "config.json").write_text("{}")
        (folder / "model.safetensors").write_bytes(b"")

    assert ensure_cached_folder("m", build) == tmp_path / "m"
    assert ensure_cached_folder("m", build) == tmp_path / "m"
    assert len(builds) == 1


def test_loads_a_model_folder_by_path(tiny_moe: LoadedModel) -> None:
    loaded = load_model(str(tiny_moe.path), dtype=torch.bfloat16)
    assert loaded.path == tiny_moe.path
    assert next(loaded.model.parameters()).dtype == torch.bfloat16
    assert loaded.max_context == tiny_moe.max_context


def test_unknown_ids_name_what_is_available(tmp_path: Path) -> None:
    assert available_models() == ["builtin:smollm2-135m-instruct", "builtin:tiny-qwen3-moe"]
    with pytest.raises(ModelNotFoundError, match="builtin:smollm2-135m-instruct") as unknown_builtin:
        load_model("builtin:gpt-5")
    assert "no builtin model has that name" in str(unknown_builtin.value)
    with pytest.raises(ModelNotFoundError, match="no such folder"):
        load_model(str(tmp_path / "missing"))
    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(ModelNotFoundError, match="not a model folder"):
        load_model(str(tmp_path))


def test_a_model_folder_without_tokenizer_is_a_clear_error(tiny_moe: LoadedModel, tmp_path: Path) -> None:
    for name in ("config.json", "model.safetensors"):
        (tmp_path / name).symlink_to(tiny_moe.path / name)
    with pytest.raises(ModelNotFoundError, match="no usable tokenizer"):
        load_model(str(tmp_path))
