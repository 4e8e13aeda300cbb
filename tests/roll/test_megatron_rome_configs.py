"""The ROME recipes at scale (configs/rome/) fit Qwen3-30B-A3B and their GPUs, and are configs/ipa.yaml's
recipe at fleet size: generated tasks with hundreds held out, iflow in ROCK, initialized resampling, SFT warm
start."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from roll.config import load_config
from roll.pipeline.config import TrainConfig
from roll.rollout.terminal.config import TerminalEnvConfig
from roll.sft.config import SFTConfig
from roll.trainer.megatron.config import MegatronBackendConfig, check_against_model
from rome.data.families import FAMILIES
from rome.data.recipe import planned_instances
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


RECIPES = ["ipa_qwen3_30b_a3b.yaml", "ipa_qwen3_30b_a3b_multinode.yaml"]


@pytest.mark.parametrize("name", RECIPES)
def test_recipes_generate_hundreds_of_tasks_and_hold_out_at_least_256(name: str) -> None:
    env = _ipa(name).env
    assert isinstance(env, TerminalEnvConfig) and env.data is not None
    data = env.data
    # Six families (the SFT schedule is sized for them), each instance's level drawn from its seed;
    # line-filter is held out as a family.
    assert set(data.families) == set(FAMILIES) - {"fix-bug", "line-filter"}
    assert set(data.out_of_family) == {"line-filter"}
    assert all("level" not in knobs for knobs in data.families.values())
    planned = planned_instances(data)
    train = {task_id for task_id, (side, _) in planned.items() if side == "train"}
    held_out = {task_id for task_id, (side, _) in planned.items() if side == "eval"}
    assert len(train) >= 300 and len(held_out) >= 256 and not train & held_out
    # That no held-out instance repeats a train prompt or oracle is tests/rome/data/test_held_out_is_new.py's.


@pytest.mark.parametrize("name", RECIPES)
def test_recipes_run_iflow_in_a_fleet_with_initialized_resampling(name: str) -> None:
    config = _ipa(name)
    env = config.env
    assert isinstance(env, TerminalEnvConfig)
    assert env.agent.prompt_profile == "full" and env.agent.placement == "host"
    assert env.agent.max_turns >= 16 and env.rock.admin_url is not None
    assert env.resampling.enabled and env.resampling.imitation and env.resampling.anchors >= 2
    assert config.loss.type == "ipa" and config.warm_start is not None and config.warm_start.eval_base
    # What `roll train`'s data stage adds to the warm start (with_prepared_data) loads too.
    sft = Path("/shared/ale/datasets/0123456789abcdef/sft.jsonl")
    warm = load_config(
        SFTConfig,
        ROOT / config.warm_start.sft_config,
        [*config.warm_start.overrides, f"data.path={sft}"],
    )
    assert warm.data.path == sft
    # The cosine decay spans the warm start: every oracle-teacher attempt kept, for all its epochs.
    assert env.data is not None and warm.trainer.schedule is not None
    conversations = len(env.data.families) * env.data.train_per_family * env.data.attempts
    assert warm.trainer.schedule.total_steps == warm.epochs * math.ceil(conversations / warm.batch_size)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error of a machine without CUDA")
def test_the_recipe_trainer_without_cuda_says_which_config_to_use() -> None:
    from roll.trainer.megatron.backend import MegatronNeedsCudaError
    from roll.trainer.protocol import build_backend

    with pytest.raises(MegatronNeedsCudaError) as error:
        build_backend(_ipa("ipa_qwen3_30b_a3b.yaml").trainer)
    message = str(error.value)
    assert "needs a CUDA GPU" in message and "set trainer.type: torch" in message
    # the CPU recipes it names, on torch
    for config in ("configs/gem_guess_the_number.yaml", "configs/sft.yaml"):
        assert config in message and "type: megatron" not in (ROOT / config).read_text()
