"""The ROME recipes (configs/rome/) fit Qwen3-30B-A3B and their GPUs, and play a real terminal task of the
suite through ROCK with bash actions."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from roll.config import load_config
from roll.pipeline.config import TrainConfig
from roll.sft.config import SFTConfig
from roll.trainer.megatron.config import MegatronBackendConfig, check_against_model
from tests.roll.test_megatron_config import QWEN3_30B_A3B

ROOT = Path(__file__).resolve().parents[2]
GPUS_PER_NODE = 8


def _ipa(name: str) -> TrainConfig:
    return load_config(TrainConfig, ROOT / "configs" / "rome" / name)


def test_one_node_recipe_colocates_trainer_and_engines_on_8_gpus() -> None:
    config = _ipa("ipa_qwen3_30b_a3b.yaml")
    trainer, engine, res = config.trainer, config.engines.engine, config.resources
    assert isinstance(trainer, MegatronBackendConfig) and engine.type == "sglang"
    assert res.trainer_ranks * res.trainer_gpus == GPUS_PER_NODE
    check_against_model(trainer, QWEN3_30B_A3B, world_size=res.trainer_ranks)
    # Colocated: the engines take the trainer's GPUs in tp_size ranges, sleep while it steps, and get
    # weights as tensors.
    assert res.engine_gpus == 0 and config.engines.num_engines * engine.tp_size == GPUS_PER_NODE
    assert config.multiplex.enabled and engine.enable_memory_saver and engine.weight_update == "tensor"
    warm = load_config(SFTConfig, ROOT / config.warm_start.sft_config, config.warm_start.overrides)
    check_against_model(warm.trainer, QWEN3_30B_A3B, world_size=GPUS_PER_NODE)


def test_multinode_recipe_gives_trainer_and_engines_their_own_gpus() -> None:
    config = _ipa("ipa_qwen3_30b_a3b_multinode.yaml")
    trainer, engine, res = config.trainer, config.engines.engine, config.resources
    assert isinstance(trainer, MegatronBackendConfig) and trainer.pipeline_parallel_size > 1
    check_against_model(trainer, QWEN3_30B_A3B, world_size=res.trainer_ranks)
    trainer_nodes = res.trainer_ranks * res.trainer_gpus / GPUS_PER_NODE
    engine_nodes = config.engines.num_engines * res.engine_gpus / GPUS_PER_NODE
    assert trainer_nodes == 2 and engine_nodes == 2
    assert res.engine_gpus == engine.tp_size and not config.multiplex.enabled
    assert engine.weight_update == "distributed" and not engine.enable_memory_saver
    warm = load_config(SFTConfig, ROOT / config.warm_start.sft_config, config.warm_start.overrides)
    check_against_model(warm.trainer, QWEN3_30B_A3B, world_size=GPUS_PER_NODE)


@pytest.mark.parametrize("name", ["ipa_qwen3_30b_a3b.yaml", "ipa_qwen3_30b_a3b_multinode.yaml"])
def test_recipes_play_a_suite_terminal_task_through_rock(name: str) -> None:
    from rome.terminal_tasks.env import FINISH_ACTION, TERMINAL_PREFIX, load_terminal_task

    env = _ipa(name).env
    assert env.env_id.startswith(TERMINAL_PREFIX) and env.rock_url is not None
    task_dir = Path(env.env_id.removeprefix(TERMINAL_PREFIX))
    assert not task_dir.is_absolute() and task_dir.parent == Path("rome/tasks/terminal-pro")
    task = load_terminal_task(f"{TERMINAL_PREFIX}{ROOT / task_dir}")  # what the rollout worker loads
    assert task.id == task_dir.name and task.instruction
    assert env.system_prompt is not None and f"the single word {FINISH_ACTION}" in env.system_prompt
    assert env.env_kwargs["max_steps"] == env.max_turns


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error of a machine without CUDA")
def test_the_recipe_trainer_without_cuda_says_which_config_to_use() -> None:
    from roll.trainer.megatron.backend import MegatronNeedsCudaError
    from roll.trainer.select import build_backend

    with pytest.raises(MegatronNeedsCudaError) as error:
        build_backend(_ipa("ipa_qwen3_30b_a3b.yaml").trainer)
    message = str(error.value)
    assert "needs a CUDA GPU" in message and "set trainer.type: torch" in message
    # the CPU recipes it names, on torch
    for config in ("configs/gem_guess_the_number.yaml", "configs/sft.yaml"):
        assert config in message and "type: megatron" not in (ROOT / config).read_text()
