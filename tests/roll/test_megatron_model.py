"""Hugging Face models in megatron-core on CPU (one gloo process): the packed forward's per-token logprobs and
the loss gradients equal transformers', and the weights come back out (inference state, HF export) exactly.

megatron-core's pipeline schedule and optimizers allocate on CUDA, so `MegatronBackend.logprobs`,
`train_step` and checkpoints run in `roll.trainer.megatron.gpu_check` on a GPU; here the backend's model
setup, packed inputs, logprob maths and weight gathering run on megatron-core's own modules.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config, Qwen3Config

from roll.algo.config import IPALossConfig
from roll.algo.losses import build_loss
from roll.models import LoadedModel
from roll.models.layout import to_transformers_layout
from roll.trainer.forward import packed_logprobs
from roll.trainer.megatron.backend import MegatronBackend, MegatronNeedsCudaError
from roll.trainer.megatron.checkpoint import layout_meta
from roll.trainer.megatron.config import MegatronBackendConfig
from roll.trainer.megatron.forward import packed_inputs, token_logprobs
from roll.trainer.megatron.mapping import megatron_to_hf
from roll.trainer.megatron.weights import local_parameters, save_hf_folder
from tests.roll.test_megatron_worker import megatron_on_cpu, sample_batch

CPU = torch.device("cpu")
# float32 on both sides; the only difference is the order of floating point operations.
LOGPROB_ATOL = 1e-5


@pytest.fixture(scope="module")
def megatron_world() -> Iterator[None]:
    """One-process gloo group with megatron-core's model-parallel groups (all sizes 1)."""
    from megatron.core import parallel_state as ps

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with megatron_on_cpu():
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
        ps.initialize_model_parallel()
        try:
            yield
        finally:
            ps.destroy_model_parallel()
            dist.destroy_process_group()


def cpu_backend(model: str, dtype: str = "float32") -> MegatronBackend:
    """The backend's model half on CPU (no optimizer: megatron-core builds those on CUDA only)."""
    backend = MegatronBackend.__new__(MegatronBackend)
    config = MegatronBackendConfig(model=model, dtype=dtype, moe_token_dispatcher="allgather")
    backend._setup_model(config, CPU)
    return backend


def megatron_logprobs(backend: MegatronBackend, batch, with_entropy: bool = False):
    inputs = packed_inputs(batch, batch.num_tokens + 5, CPU)
    logits = backend.model(
        inputs.input_ids, inputs.position_ids, None, packed_seq_params=inputs.packed_seq_params
    )
    return token_logprobs(logits, batch, backend.shape.vocab_size, with_entropy)


@pytest.fixture(scope="module")
def moe_backend(megatron_world: None) -> MegatronBackend:
    return cpu_backend("builtin:tiny-qwen3-moe")


def test_without_cuda_the_backend_says_to_use_torch() -> None:
    with pytest.raises(MegatronNeedsCudaError, match=r"needs a CUDA GPU.*trainer\.type: torch"):
        MegatronBackend(MegatronBackendConfig())


def test_tiny_moe_logprobs_match_transformers(moe_backend: MegatronBackend, tiny_moe: LoadedModel) -> None:
    batch = sample_batch()
    moe_backend.model.eval()
    with torch.no_grad():
        got, got_entropy = megatron_logprobs(moe_backend, batch, with_entropy=True)
        expected, expected_entropy = packed_logprobs(tiny_moe.model, batch, CPU, with_entropy=True)
    assert batch.num_loss_tokens == 20 and bool((expected[batch.loss_mask] < 0).all())
    torch.testing.assert_close(got, expected, atol=LOGPROB_ATOL, rtol=0)
    torch.testing.assert_close(got_entropy, expected_entropy, atol=LOGPROB_ATOL, rtol=0)


def test_bf16_model_is_bf16_throughout_and_close_to_float32(
    megatron_world: None, tiny_moe: LoadedModel
) -> None:
    backend = cpu_backend("builtin:tiny-qwen3-moe", dtype="bfloat16")
    assert {p.dtype for p in local_parameters(backend.model).values()} == {torch.bfloat16}  # norms included
    batch = sample_batch()
    backend.model.eval()
    with torch.no_grad():
        got, _ = megatron_logprobs(backend, batch)
        expected, _ = packed_logprobs(tiny_moe.model, batch, CPU)
    # bf16 keeps 8 bits of mantissa: logprobs near -11 move by a few thousandths.
    torch.testing.assert_close(got, expected, atol=0.02, rtol=0)


def test_ipa_loss_gradients_match_transformers(moe_backend: MegatronBackend) -> None:
    from roll.models import load_model

    loss = build_loss(IPALossConfig())
    batch = loss.prepare(sample_batch())
    moe_backend.model.train()
    moe_backend.model.zero_grad_buffer()
    logprobs, entropy = megatron_logprobs(moe_backend, batch, with_entropy=True)
    loss(batch, logprobs, logprobs.detach(), entropy).loss.backward()
    grads = {name: p.main_grad for name, p in local_parameters(moe_backend.model).items()}
    got = to_transformers_layout(megatron_to_hf(grads, moe_backend.shape), moe_backend.shape.num_experts)

    reference = load_model("builtin:tiny-qwen3-moe").model.train()
    ref_logprobs, ref_entropy = packed_logprobs(reference, batch, CPU, with_entropy=True)
    loss(batch, ref_logprobs, ref_logprobs.detach(), ref_entropy).loss.backward()
    for name, param in reference.named_parameters():
        scale = float(param.grad.abs().max())
        assert scale > 0, f"{name} got no gradient"
        torch.testing.assert_close(got[name], param.grad, atol=1e-5 * scale, rtol=1e-4, msg=name)


def test_inference_weights_and_hf_export_round_trip(
    moe_backend: MegatronBackend, tiny_moe: LoadedModel, tmp_path: Path
) -> None:
    moe_backend.version = 3
    weights = moe_backend.state_dict_for_inference()
    assert weights.version == 3
    reference = tiny_moe.model.state_dict()
    assert sorted(weights.state_dict) == sorted(reference)
    assert all(torch.equal(weights.state_dict[name], value) for name, value in reference.items())

    buckets = list(moe_backend.weight_buckets(bucket_bytes=1_000_000))
    assert len(buckets) > 1 and "model.layers.0.mlp.experts.7.up_proj.weight" in dict(buckets[1] + buckets[0])

    moe_backend.export_hf(tmp_path / "export")
    exported = AutoModelForCausalLM.from_pretrained(tmp_path / "export", dtype=torch.float32).state_dict()
    assert all(torch.equal(exported[name], value) for name, value in reference.items())
    from transformers import AutoTokenizer

    assert len(AutoTokenizer.from_pretrained(tmp_path / "export")) == len(tiny_moe.tokenizer)

    buckets = moe_backend.weight_buckets(bucket_bytes=1_000_000)
    save_hf_folder(buckets, moe_backend.folder, tmp_path / "sharded", write=True)
    assert len(list((tmp_path / "sharded").glob("*.safetensors"))) > 1
    exported = AutoModelForCausalLM.from_pretrained(tmp_path / "sharded", dtype=torch.float32).state_dict()
    assert all(torch.equal(exported[name], value) for name, value in reference.items())


def test_load_refuses_an_incomplete_checkpoint_or_another_layout(
    moe_backend: MegatronBackend, tmp_path: Path
) -> None:
    """Checked before any file is read (saving and the optimizer's state need CUDA: gpu_check resumes)."""
    with pytest.raises(FileNotFoundError, match=r"checkpoint\.json missing.*written by save\(\)"):
        moe_backend.load(tmp_path)
    other = {**layout_meta(moe_backend.config, 1), "world_size": 2, "tensor_parallel_size": 2}
    (tmp_path / "checkpoint.json").write_text(json.dumps({"step": 4, "version": 4, **other}))
    before = (moe_backend.step, moe_backend.version)
    with pytest.raises(ValueError, match=r"'tensor_parallel_size': 2.*same parallel sizes and number of GPU"):
        moe_backend.load(tmp_path)
    assert (moe_backend.step, moe_backend.version) == before


def test_gpu_check_reports_a_missing_gpu_as_a_failed_row() -> None:
    from roll.trainer.megatron.gpu_check import run_checks

    assert run_checks() == [("CUDA available", False, "torch.cuda.is_available() is False")]


def _dense_folder(kind: str, folder: Path) -> Path:
    torch.manual_seed(1)
    common = dict(
        vocab_size=49155,  # not a multiple of 128: the padded vocabulary columns must take no mass
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )
    config = {
        "llama-tied": lambda: LlamaConfig(tie_word_embeddings=True, **common),
        "qwen2-bias": lambda: Qwen2Config(tie_word_embeddings=False, **common),
        "qwen3-tied": lambda: Qwen3Config(head_dim=16, tie_word_embeddings=True, **common),
    }[kind]()
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    if kind == "qwen2-bias":  # HF initialises biases to zero; make the fused bias layout matter
        with torch.no_grad():
            for name, param in model.named_parameters():
                if name.endswith("_proj.bias"):
                    param.normal_()
    model.save_pretrained(folder)
    return folder


@pytest.mark.parametrize("kind", ["llama-tied", "qwen2-bias", "qwen3-tied"])
def test_dense_models_match_transformers(kind: str, megatron_world: None, tmp_path: Path) -> None:
    folder = _dense_folder(kind, tmp_path / kind)
    backend = cpu_backend(str(folder))
    reference = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    batch = sample_batch()
    backend.model.eval()
    with torch.no_grad():
        got, _ = megatron_logprobs(backend, batch)
        expected, _ = packed_logprobs(reference, batch, CPU)
    torch.testing.assert_close(got, expected, atol=LOGPROB_ATOL, rtol=0)
    state = backend.state_dict_for_inference().state_dict
    for name, value in reference.state_dict().items():
        assert torch.equal(state.get(name, value), value), name
    assert ("lm_head.weight" in state) == (kind == "qwen2-bias")


@pytest.mark.parametrize("dp_size", [1, 2, 3])
def test_micro_batches_dealt_to_replicas_reassemble_the_batch(dp_size: int) -> None:
    """Round-robin dealing with idle passes, one padded length per replica, and reassembly of the values."""
    from roll.trainer.megatron.backend import assemble_token_values, deal_micro_batches

    batch = sample_batch()  # four trajectories of 9, 10, 11 and 16 tokens: four micro-batches of <= 12
    budget = 12
    replicas = {}
    for rank in range(dp_size):
        micro_batches, length = deal_micro_batches(batch, budget, rank, dp_size, length_multiple=4)
        assert len(micro_batches) == -(-4 // dp_size) and length % 4 == 0
        assert all(micro.num_tokens <= length for micro, _ in micro_batches)
        real = [micro for micro, is_real in micro_batches if is_real]
        assert all(micro.num_tokens <= budget or micro.num_trajectories == 1 for micro in real)
        replicas[rank] = [micro.input_ids.float() for micro in real]
    assert torch.equal(assemble_token_values(batch, budget, dp_size, replicas), batch.input_ids.float())
