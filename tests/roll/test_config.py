"""Config loading: YAML + key.sub=value overrides; errors name the key and what is allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from roll.algo.config import GRPOLossConfig, LossConfig
from roll.config import ConfigError, StrictConfig, load_config
from roll.trainer.config import TorchBackendConfig


class RunConfig(StrictConfig):
    trainer: TorchBackendConfig = TorchBackendConfig()
    loss: LossConfig = GRPOLossConfig()
    steps: int = 1


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(text)
    return path


def test_yaml_and_overrides(tmp_path: Path) -> None:
    path = _write(tmp_path, "steps: 3\ntrainer:\n  optimizer:\n    lr: 1.0e-4\nloss:\n  type: ipa\n")
    config = load_config(
        RunConfig, path, ["trainer.optimizer.lr=2e-5", "loss.gamma=0.9", "trainer.optimizer.betas=[0.8, 0.9]"]
    )
    assert config.steps == 3
    assert config.trainer.optimizer.lr == 2e-5
    assert config.trainer.optimizer.betas == (0.8, 0.9)
    assert config.loss.type == "ipa" and config.loss.gamma == 0.9


def test_unknown_key_names_the_allowed_keys(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        load_config(RunConfig, None, ["trainer.optimizer.learning_rate=1"])
    message = str(error.value)
    assert "trainer.optimizer.learning_rate: unknown key" in message
    assert "allowed keys: betas, eps, grad_clip, lr, weight_decay" in message


def test_unknown_key_inside_a_union_variant() -> None:
    expected = r"loss\.clip_low: unknown key \(allowed keys: gamma, group_baseline"
    with pytest.raises(ConfigError, match=expected):
        load_config(RunConfig, None, ["loss.type=ipa", "loss.clip_low=0.1"])


def test_bad_values_name_the_key_and_allowed_values() -> None:
    with pytest.raises(ConfigError) as error:
        load_config(RunConfig, None, ["loss.type=ppo", "trainer.dtype=float16", "steps=many"])
    message = str(error.value)
    assert "loss: " in message and "'ipa'" in message and "'sft'" in message and "'ppo'" in message
    assert "trainer.dtype: Input should be 'float32' or 'bfloat16' (got 'float16')" in message
    assert "steps: " in message and "'many'" in message


def test_malformed_override_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"not of the form key\.sub=value"):
        load_config(RunConfig, None, ["steps"])
    with pytest.raises(ConfigError, match="steps is a value, not a section"):
        load_config(RunConfig, None, ["steps=2", "steps.x=1"])
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(RunConfig, tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_config(RunConfig, _write(tmp_path, "- 1\n- 2\n"))


def test_schedule_decay_needs_total_steps() -> None:
    with pytest.raises(ConfigError, match="needs total_steps"):
        load_config(RunConfig, None, ["trainer.schedule.type=cosine"])


def test_train_config_picks_trainer_and_engine_variants_by_type() -> None:
    from roll.engine.sglang.config import SGLangEngineConfig
    from roll.engine.torch_engine.config import TorchEngineConfig
    from roll.pipeline.config import TrainConfig
    from roll.trainer.megatron.config import MegatronBackendConfig

    # its engine section names no type: torch
    default = load_config(TrainConfig, "configs/gem_guess_the_number.yaml")
    assert isinstance(default.trainer, TorchBackendConfig)
    assert isinstance(default.engines.engine, TorchEngineConfig)
    scale = load_config(
        TrainConfig,
        None,
        ["trainer.type=megatron", "trainer.tensor_parallel_size=2", "engines.engine.type=sglang"],
    )
    assert isinstance(scale.trainer, MegatronBackendConfig) and scale.trainer.tensor_parallel_size == 2
    assert isinstance(scale.engines.engine, SGLangEngineConfig)
    with pytest.raises(ConfigError, match=r"trainer\.type must be 'torch' or 'megatron'"):
        load_config(TrainConfig, None, ["trainer.type=jax"])
    with pytest.raises(ConfigError, match=r"engines\.engine\.type must be 'torch', 'sglang' or 'scripted'"):
        load_config(TrainConfig, None, ["engines.engine.type=vllm"])
    unknown_engine_key = r"engines\.engine\.tp_size: unknown key \(allowed keys: matmul_dtype, max_batch"
    with pytest.raises(ConfigError, match=unknown_engine_key):
        load_config(TrainConfig, None, ["engines.engine.tp_size=2"])
    with pytest.raises(ConfigError, match=r"trainer\.device: unknown key \(allowed keys: activation_rec"):
        load_config(TrainConfig, None, ["trainer.type=megatron", "trainer.device=cuda"])


def test_dropping_uniform_groups_needs_groups() -> None:
    from roll.pipeline.config import TrainConfig

    assert load_config(TrainConfig, None, ["rollout.drop_uniform_groups=2"]).rollout.drop_uniform_groups == 2
    with pytest.raises(ConfigError, match=r"drop_uniform_groups needs rollout\.group_size >= 2"):
        load_config(TrainConfig, None, ["rollout.drop_uniform_groups=2", "rollout.group_size=1"])


def test_a_kl_to_the_reference_needs_the_torch_trainer() -> None:
    from roll.pipeline.config import TrainConfig

    assert load_config(TrainConfig, None, ["loss.type=ipa", "loss.kl_coef=0.05"]).loss.kl_coef == 0.05
    with pytest.raises(ConfigError, match=r"loss\.kl_coef=0\.05 needs trainer\.type: torch"):
        load_config(TrainConfig, None, ["loss.type=ipa", "loss.kl_coef=0.05", "trainer.type=megatron"])


def test_a_terminal_env_refuses_an_eval_seed_offset_it_would_not_use(tmp_path: Path) -> None:
    from roll.pipeline.config import TrainConfig

    path = tmp_path / "terminal.yaml"
    path.write_text("env:\n  type: terminal\n  task_ids: [fix-permissions]\n")
    assert load_config(TrainConfig, path).eval.seed_offset == 0
    with pytest.raises(
        ConfigError, match=r"eval\.seed_offset is 5, but a terminal env .* Remove eval\.seed_offset"
    ):
        load_config(TrainConfig, path, ["eval.seed_offset=5"])
    assert load_config(TrainConfig, None, ["eval.seed_offset=5"]).eval.seed_offset == 5  # GEM: its env seeds


def test_gpu_variants_say_they_need_a_gpu_when_built_on_this_machine() -> None:
    import torch

    from roll.engine.protocol import EngineError
    from roll.engine.sglang.config import SGLangEngineConfig
    from roll.pipeline.actors import build_engine
    from roll.trainer.megatron.config import MegatronBackendConfig
    from roll.trainer.protocol import build_backend

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU: the GPU backends are checked by scripts/gpu_check.sh")
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        build_backend(MegatronBackendConfig())
    with pytest.raises(EngineError, match=r"engines\.engine\.type: torch"):
        build_engine("builtin:tiny-qwen3-moe", SGLangEngineConfig(), base_gpu_id=0)
