"""HF <-> Megatron weight names and layouts, and TP/PP/EP sharding, on the tiny models' real state dicts."""

from __future__ import annotations

import itertools

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen3Config

from roll.models import LoadedModel, resolve_model_path
from roll.models.layout import to_checkpoint_layout, to_transformers_layout
from roll.trainer.megatron.mapping import (
    ModelShape,
    fuse_qkv,
    hf_to_megatron,
    megatron_names,
    megatron_to_hf,
    split_qkv,
    unmapped_checkpoint_names,
)
from roll.trainer.megatron.sharding import (
    ParallelLayout,
    RankCoords,
    all_coords,
    padded_vocab_size,
    shard,
    unshard,
)


def checkpoint_state(model_id: str) -> dict[str, torch.Tensor]:
    """The safetensors on disk (checkpoint names: MoE experts one by one)."""
    folder = resolve_model_path(model_id)
    state: dict[str, torch.Tensor] = {}
    for file in sorted(folder.glob("*.safetensors")):
        state.update(load_file(file))
    return state


def dense_model(kind: str, tied: bool) -> tuple[ModelShape, dict[str, torch.Tensor]]:
    torch.manual_seed(0)
    common = dict(
        vocab_size=200,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=tied,
    )
    config = {
        "llama": lambda: LlamaConfig(**common),
        "qwen2": lambda: Qwen2Config(**common),
        "qwen3": lambda: Qwen3Config(head_dim=16, **common),
    }[kind]()
    model = LlamaForCausalLM(config) if kind == "llama" else AutoModelForCausalLM.from_config(config)
    state = dict(model.state_dict())
    if tied:
        state.pop("lm_head.weight", None)
    return ModelShape.from_hf(config.to_dict()), state


@pytest.fixture(scope="module")
def moe() -> tuple[ModelShape, dict[str, torch.Tensor]]:
    import json

    folder = resolve_model_path("builtin:tiny-qwen3-moe")
    hf = json.loads((folder / "config.json").read_text())
    return ModelShape.from_hf(hf), checkpoint_state("builtin:tiny-qwen3-moe")


def assert_same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert sorted(a) == sorted(b)
    for name in a:
        assert a[name].shape == b[name].shape, name
        assert torch.equal(a[name], b[name]), name


def test_qkv_fusion_groups_query_heads_with_their_key_value_head() -> None:
    shape = ModelShape.from_hf(
        {"model_type": "llama", "num_hidden_layers": 1, "hidden_size": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "head_dim": 1, "vocab_size": 8}
    )  # fmt: skip
    q = torch.tensor([[1.0], [2.0], [3.0], [4.0]])  # heads 0,1 -> group 0; heads 2,3 -> group 1
    k = torch.tensor([[10.0], [20.0]])
    v = torch.tensor([[100.0], [200.0]])
    fused = fuse_qkv(q, k, v, shape)
    assert fused[:, 0].tolist() == [1.0, 2.0, 10.0, 100.0, 3.0, 4.0, 20.0, 200.0]
    assert all(torch.equal(x, y) for x, y in zip(split_qkv(fused, shape), (q, k, v), strict=True))


def test_tiny_moe_shape_and_round_trip(moe: tuple[ModelShape, dict[str, torch.Tensor]]) -> None:
    shape, state = moe
    assert shape.num_experts == 8 and all(shape.moe_layers) and shape.qk_norm and not shape.tied_embeddings
    mc = hf_to_megatron(state, shape)
    assert set(mc) == megatron_names(shape)
    assert mc["decoder.layers.0.self_attention.linear_qkv.weight"].shape == (
        (shape.num_heads + 2 * shape.num_groups) * shape.head_dim,
        shape.hidden_size,
    )
    fc1 = mc["decoder.layers.1.mlp.experts.local_experts.5.linear_fc1.weight"]
    assert torch.equal(fc1[:32], state["model.layers.1.mlp.experts.5.gate_proj.weight"])
    assert torch.equal(fc1[32:], state["model.layers.1.mlp.experts.5.up_proj.weight"])
    assert torch.equal(mc["decoder.layers.1.mlp.router.weight"], state["model.layers.1.mlp.gate.weight"])
    assert_same(megatron_to_hf(mc, shape), state)


@pytest.mark.parametrize(("kind", "tied"), [("llama", True), ("qwen2", False), ("qwen3", True)])
def test_dense_round_trip(kind: str, tied: bool) -> None:
    shape, state = dense_model(kind, tied)
    assert shape.qkv_bias == (kind == "qwen2") and shape.qk_norm == (kind == "qwen3")
    mc = hf_to_megatron(state, shape)
    assert ("output_layer.weight" in mc) != tied
    assert "decoder.layers.3.mlp.linear_fc1.weight" in mc
    assert_same(megatron_to_hf(mc, shape), state)


def test_transformers_layout_equals_the_in_memory_model(tiny_moe: LoadedModel) -> None:
    shape = ModelShape.from_hf(tiny_moe.model.config.to_dict())
    converted = to_transformers_layout(checkpoint_state("builtin:tiny-qwen3-moe"), shape.num_experts)
    assert_same(converted, dict(tiny_moe.model.state_dict()))
    assert_same(
        to_checkpoint_layout(dict(tiny_moe.model.state_dict())), checkpoint_state("builtin:tiny-qwen3-moe")
    )


LAYOUTS = [
    ParallelLayout(tensor=2),
    ParallelLayout(pipeline=2),
    ParallelLayout(expert=4),
    ParallelLayout(tensor=2, pipeline=2, expert=2, expert_tensor=2),
    ParallelLayout(tensor=2, expert=8),
]


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_moe_shard_then_unshard_gives_the_original(
    layout: ParallelLayout, moe: tuple[ModelShape, dict[str, torch.Tensor]]
) -> None:
    shape, state = moe
    whole = hf_to_megatron(state, shape)
    pieces = {coords: shard(whole, shape, layout, coords) for coords in all_coords(layout)}
    assert_same(unshard(pieces, shape, layout, set(whole)), whole)


def test_moe_rank_holds_megatron_local_names_and_shapes(
    moe: tuple[ModelShape, dict[str, torch.Tensor]],
) -> None:
    shape, state = moe
    whole = hf_to_megatron(state, shape)
    layout = ParallelLayout(tensor=2, pipeline=2, expert=2)
    mine = shard(whole, shape, layout, RankCoords(tensor=1, pipeline=1, expert=1))
    # stage 1 holds global layer 1 as its local layer 0, expert rank 1 holds experts 4..7 as 0..3
    expert = mine["decoder.layers.0.mlp.experts.local_experts.0.linear_fc2.weight"]
    assert torch.equal(expert, whole["decoder.layers.1.mlp.experts.local_experts.4.linear_fc2.weight"])
    assert "decoder.layers.1.input_layernorm.weight" not in mine
    assert "embedding.word_embeddings.weight" not in mine
    assert mine["output_layer.weight"].shape == (
        padded_vocab_size(shape.vocab_size, 2) // 2,
        shape.hidden_size,
    )
    qkv = mine["decoder.layers.0.self_attention.linear_qkv.weight"]
    assert qkv.shape[0] == (shape.num_heads + 2 * shape.num_groups) * shape.head_dim // 2
    fc1 = whole["decoder.layers.1.mlp.experts.local_experts.4.linear_fc1.weight"]
    assert torch.equal(mine["decoder.layers.0.mlp.experts.local_experts.0.linear_fc1.weight"], fc1)


@pytest.mark.parametrize(("tensor", "pipeline"), list(itertools.product([1, 2], [1, 2])))
def test_dense_tied_shard_then_unshard(tensor: int, pipeline: int) -> None:
    shape, state = dense_model("qwen3", tied=True)
    whole = hf_to_megatron(state, shape)
    layout = ParallelLayout(tensor=tensor, pipeline=pipeline)
    pieces = {coords: shard(whole, shape, layout, coords) for coords in all_coords(layout)}
    last = pieces[RankCoords(pipeline=pipeline - 1)]
    assert ("output_layer.weight" in last) == (pipeline > 1)  # megatron's copy of the tied embedding
    fc1 = pieces[RankCoords(tensor=tensor - 1)]["decoder.layers.0.mlp.linear_fc1.weight"]
    gate_rows = whole["decoder.layers.0.mlp.linear_fc1.weight"][:48]
    assert torch.equal(fc1[: 48 // tensor], gate_rows.chunk(tensor)[-1])
    assert_same(unshard(pieces, shape, layout, set(whole)), whole)


def test_checkpoint_tensors_without_a_place_are_found(
    moe: tuple[ModelShape, dict[str, torch.Tensor]],
) -> None:
    shape, state = moe
    assert unmapped_checkpoint_names(set(state), shape) == set()
    extra = {"model.layers.0.self_attn.o_proj.bias", "model.layers.1.self_attn.rotary_emb.inv_freq"}
    assert unmapped_checkpoint_names(set(state) | extra, shape) == {"model.layers.0.self_attn.o_proj.bias"}


@pytest.mark.parametrize(
    ("kind", "key"), [("llama", "attention_bias"), ("llama", "mlp_bias"), ("qwen3", "attention_bias")]
)
def test_biases_megatron_layers_lack_are_refused(kind: str, key: str) -> None:
    hf = {"model_type": kind, "num_hidden_layers": 1, "hidden_size": 8, "num_attention_heads": 2,
          "vocab_size": 16, key: True}  # fmt: skip
    with pytest.raises(ValueError, match=f"{kind} with {key} is not supported"):
        ModelShape.from_hf(hf)
