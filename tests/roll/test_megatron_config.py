"""MegatronBackendConfig and its layout check against a model: errors name the key and the allowed values."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from roll.config import ConfigError, load_config
from roll.models import resolve_model_path
from roll.trainer.megatron.config import MegatronBackendConfig, ModelLayoutError, check_against_model

QWEN3_30B_A3B = {  # the layout-relevant part of Qwen3-30B-A3B's config.json
    "model_type": "qwen3_moe",
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "num_hidden_layers": 48,
    "num_experts": 128,
}
LLAMA = {"model_type": "llama", "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32}


def test_config_imports_without_torch_or_megatron() -> None:
    code = (
        "import sys; import roll.trainer.megatron.config as c; c.MegatronBackendConfig(); "
        "assert 'torch' not in sys.modules and 'megatron' not in sys.modules, sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_defaults_and_overrides_load() -> None:
    config = load_config(
        MegatronBackendConfig,
        None,
        ["tensor_parallel_size=2", "expert_parallel_size=8", "sequence_parallel=true", "optimizer.lr=1e-6"],
    )
    assert config.type == "megatron" and config.dtype == "bfloat16" and config.distributed_optimizer
    assert config.model_parallel_size == 2 and config.optimizer.lr == 1e-6


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("tensor_parallel_size=0", "tensor_parallel_size: Input should be greater than or equal to 1"),
        ("activation_recompute=some", "activation_recompute: Input should be 'none', 'selective' or 'full'"),
        ("dtype=float16", "dtype: Input should be 'bfloat16' or 'float32'"),
        ("pipeline_parallel=2", "pipeline_parallel: unknown key (allowed keys: activation_recompute,"),
        ("sequence_parallel=true", "sequence_parallel needs tensor_parallel_size > 1"),
    ],
)
def test_bad_values_name_the_key(override: str, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        load_config(MegatronBackendConfig, None, [override])
    assert message in str(error.value)


def test_context_parallel_needs_bfloat16() -> None:
    with pytest.raises(ConfigError, match="context_parallel_size > 1 needs dtype: bfloat16"):
        load_config(MegatronBackendConfig, None, ["context_parallel_size=2", "dtype=float32"])
    assert load_config(MegatronBackendConfig, None, ["context_parallel_size=2"]).model_parallel_size == 2


def test_context_parallel_needs_transformer_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The package check runs with the layout check (on the trainer's machine), not when a config loads."""
    import roll.trainer.megatron.config as megatron_config

    config = MegatronBackendConfig(context_parallel_size=2)
    monkeypatch.setattr(megatron_config, "transformer_engine_installed", lambda: False)
    with pytest.raises(ModelLayoutError) as error:
        check_against_model(config, LLAMA, world_size=2)
    assert str(error.value) == (
        "trainer.context_parallel_size=2 needs Transformer Engine's attention, and transformer_engine is not "
        "importable here: pip install 'transformer-engine[pytorch]' on every GPU node, or set "
        "trainer.context_parallel_size: 1"
    )
    monkeypatch.setattr(megatron_config, "transformer_engine_installed", lambda: True)
    check_against_model(config, LLAMA, world_size=4)
    check_against_model(MegatronBackendConfig(), LLAMA, world_size=1)


def test_expert_and_tensor_parallel_need_sequence_parallel() -> None:
    with pytest.raises(ConfigError, match="needs sequence_parallel: true"):
        load_config(MegatronBackendConfig, None, ["tensor_parallel_size=2", "expert_parallel_size=2"])


def test_rome_layout_fits_qwen3_30b_a3b() -> None:
    one_node = MegatronBackendConfig(tensor_parallel_size=2, expert_parallel_size=8, sequence_parallel=True)
    check_against_model(one_node, QWEN3_30B_A3B, world_size=8)
    several = one_node.model_copy(update={"pipeline_parallel_size": 2})
    check_against_model(several, QWEN3_30B_A3B, world_size=32)


@pytest.mark.parametrize(
    ("sizes", "world", "model", "message"),
    [
        ({"tensor_parallel_size": 3}, 3, LLAMA, "trainer.tensor_parallel_size=3 does not divide the model's "
         "num_key_value_heads=8; allowed values: 1, 2, 4, 8"),
        ({"pipeline_parallel_size": 5}, 5, LLAMA, "trainer.pipeline_parallel_size=5 does not divide the "
         "model's num_hidden_layers=32; allowed values: 1, 2, 4, 8, 16, 32"),
        ({"expert_parallel_size": 2}, 2, LLAMA, "trainer.expert_parallel_size and "
         "trainer.expert_tensor_parallel_size must be 1 for the dense model_type 'llama'"),
        ({"expert_parallel_size": 3}, 3, QWEN3_30B_A3B, "trainer.expert_parallel_size=3 does not divide the "
         "model's num_experts=128"),
        ({"tensor_parallel_size": 4}, 6, LLAMA, "world size 6 is not a multiple of tensor_parallel_size x "
         "pipeline_parallel_size x context_parallel_size = 4"),
        ({"expert_parallel_size": 16}, 8, QWEN3_30B_A3B, "world size 8 is not a multiple of "
         "expert_parallel_size x expert_tensor_parallel_size x pipeline_parallel_size = 16"),
        ({"tensor_parallel_size": 2}, 2, QWEN3_30B_A3B, "trainer.sequence_parallel must be true when "
         "tensor_parallel_size > 1 for the MoE model_type 'qwen3_moe'"),
        ({}, 1, {**LLAMA, "model_type": "mistral"}, "trainer.model: model_type 'mistral' is not supported by "
         "the megatron backend (allowed: llama, qwen2, qwen3, qwen3_moe); use trainer.type: torch"),
    ],
)  # fmt: skip
def test_layouts_that_do_not_fit_the_model(sizes: dict, world: int, model: dict, message: str) -> None:
    with pytest.raises(ModelLayoutError) as error:
        check_against_model(MegatronBackendConfig(**sizes), model, world_size=world)
    assert message in str(error.value)


def test_builtin_tiny_moe_config_as_transformers_5_writes_it() -> None:
    """transformers 5 writes num_local_experts, not num_experts."""
    hf = json.loads((resolve_model_path("builtin:tiny-qwen3-moe") / "config.json").read_text())
    check_against_model(MegatronBackendConfig(expert_parallel_size=8), hf, world_size=8)
    with pytest.raises(ModelLayoutError, match="num_experts=8"):
        check_against_model(MegatronBackendConfig(expert_parallel_size=3), hf, world_size=3)


def _tiny_moe_hf() -> dict:
    return json.loads((resolve_model_path("builtin:tiny-qwen3-moe") / "config.json").read_text())


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_transformer_config_from_tiny_moe(recompute: str) -> None:
    import torch

    from roll.trainer.megatron.model import transformer_config

    config = MegatronBackendConfig(activation_recompute=recompute, expert_parallel_size=2)
    tf = transformer_config(_tiny_moe_hf(), config)
    assert (tf.num_layers, tf.hidden_size, tf.num_attention_heads, tf.num_query_groups) == (2, 64, 4, 2)
    assert tf.kv_channels == 16 and tf.qk_layernorm and tf.gated_linear_unit and not tf.add_bias_linear
    assert (tf.num_moe_experts, tf.moe_router_topk, tf.moe_ffn_hidden_size) == (8, 2, 32)
    assert tf.moe_layer_freq == [1, 1] and not tf.moe_router_pre_softmax  # norm_topk_prob: true
    assert tf.expert_model_parallel_size == 2 and tf.params_dtype == torch.bfloat16 and tf.bf16
    assert tf.recompute_granularity == (None if recompute == "none" else recompute)


def test_dense_layers_of_a_moe_model_follow_mlp_only_layers() -> None:
    from roll.trainer.megatron.model import transformer_config

    hf = {**_tiny_moe_hf(), "num_hidden_layers": 4, "mlp_only_layers": [0], "decoder_sparse_step": 2}
    tf = transformer_config(hf, MegatronBackendConfig())
    assert tf.moe_layer_freq == [0, 1, 0, 1] and tf.ffn_hidden_size == 128


@pytest.mark.parametrize(
    ("rope", "expected"),
    [
        ({"rope_theta": 1e6}, {"rotary_base": 1e6}),
        ({"rope_parameters": {"rope_theta": 5e5, "rope_type": "default"}}, {"rotary_base": 5e5}),
        (
            {"rope_parameters": {"rope_theta": 5e5, "rope_type": "llama3", "factor": 32.0,
             "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}},
            {"rotary_base": 5e5, "rope_scaling": True, "rope_scaling_factor": 32.0},
        ),
    ],
)  # fmt: skip
def test_rope_settings(rope: dict, expected: dict) -> None:
    from roll.trainer.megatron.model import rope_settings

    assert rope_settings(rope) == expected


@pytest.mark.parametrize(
    ("rope", "message"),
    [
        ({"rope_parameters": {"rope_type": "yarn", "factor": 4.0}}, "RoPE type 'yarn' is not supported"),
        (
            {
                "rope_parameters": {
                    "rope_type": "llama3",
                    "factor": 8.0,
                    "original_max_position_embeddings": 4096,
                }
            },
            "llama3 RoPE scaling with {'original_max_position_embeddings': 4096}",
        ),
    ],
)
def test_unsupported_rope_says_to_use_torch(rope: dict, message: str) -> None:
    from roll.trainer.megatron.model import rope_settings

    with pytest.raises(ValueError, match=r"use trainer\.type: torch") as error:
        rope_settings(rope)
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"use_sliding_window": True}, "sliding-window attention"),
        ({"hidden_act": "gelu"}, "hidden_act 'gelu'"),
    ],
)
def test_unsupported_architecture_says_to_use_torch(change: dict, message: str) -> None:
    from roll.trainer.megatron.model import transformer_config

    with pytest.raises(ValueError, match=r"use trainer\.type: torch") as error:
        transformer_config({**_tiny_moe_hf(), **change}, MegatronBackendConfig())
    assert message in str(error.value)
