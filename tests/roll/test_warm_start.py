"""The warm start reuses an exported SFT model only when it was trained with the same SFT config."""

import shutil
from pathlib import Path

from roll.config import load_config
from roll.pipeline.controller import _sft_model_is_current
from roll.sft.config import SFTConfig

SFT_CONFIG = Path(__file__).parents[2] / "configs" / "sft_guess_the_number.yaml"


def exported(tmp_path: Path, config: SFTConfig) -> Path:
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "config.json").write_text("{}")
    (tmp_path / "config.json").write_text(config.model_copy(update={"export_model": True}).model_dump_json())
    return model_dir


def test_the_same_config_reuses_the_model(tmp_path: Path) -> None:
    config = load_config(SFTConfig, SFT_CONFIG, [f"output_dir={tmp_path}"])
    model_dir = exported(tmp_path, config)
    assert _sft_model_is_current(config, model_dir)
    assert _sft_model_is_current(config.model_copy(update={"resume": True}), model_dir)


def test_a_changed_config_or_a_missing_record_retrains(tmp_path: Path) -> None:
    config = load_config(SFTConfig, SFT_CONFIG, [f"output_dir={tmp_path}"])
    model_dir = exported(tmp_path, config)
    longer = load_config(SFTConfig, SFT_CONFIG, [f"output_dir={tmp_path}", "max_steps=8"])
    assert not _sft_model_is_current(longer, model_dir)
    (tmp_path / "config.json").unlink()
    assert not _sft_model_is_current(config, model_dir)
    assert not _sft_model_is_current(config, tmp_path / "absent")


def test_a_linked_or_copied_sft_folder_is_reused_not_trained_over(tmp_path: Path) -> None:
    trained_in = tmp_path / "first" / "sft-s1"
    trained_in.mkdir(parents=True)
    config = load_config(SFTConfig, SFT_CONFIG, [f"output_dir={trained_in}", "seed=1"])
    exported(trained_in, config)
    linked = tmp_path / "second" / "sft-s1"
    linked.parent.mkdir()
    linked.symlink_to(trained_in)
    wanted = load_config(SFTConfig, SFT_CONFIG, [f"output_dir={linked}", "seed=1"])
    assert _sft_model_is_current(wanted, linked / "model")
    other_seed = load_config(SFTConfig, SFT_CONFIG, [f"output_dir={linked}", "seed=2"])
    assert not _sft_model_is_current(other_seed, linked / "model")
    copied = tmp_path / "third" / "sft-s1"
    shutil.copytree(trained_in, copied)
    assert _sft_model_is_current(wanted.model_copy(update={"output_dir": copied}), copied / "model")
