"""Two-process FSDP2 (gloo, CPU) gives the same update and the same exported model as one process."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

WORKER = Path(__file__).with_name("test_trainer_fsdp_worker.py")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_two_process_fsdp2_matches_one_process(tmp_path: Path) -> None:
    from tests.roll.test_trainer_fsdp_worker import run_step, tiny_llama

    single_weights, single_metrics = run_step(tmp_path / "single_hf")

    out = tmp_path / "fsdp.pt"
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
        "--master-addr", "127.0.0.1", "--master-port", str(_free_port()), str(WORKER), str(out),
        str(tmp_path / "fsdp_hf"),
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    distributed = torch.load(out, weights_only=False)

    assert distributed["metrics"]["loss"] == pytest.approx(single_metrics["loss"], abs=1e-6)
    assert distributed["metrics"]["grad_norm"] == pytest.approx(single_metrics["grad_norm"], rel=1e-5)
    assert distributed["metrics"]["is_ratio/mean"] == pytest.approx(single_metrics["is_ratio/mean"])
    initial = tiny_llama().state_dict()
    for name, value in single_weights.items():
        torch.testing.assert_close(distributed["weights"][name], value, atol=1e-6, rtol=0)
        assert not torch.equal(value, initial[name]), f"{name} did not move"

    # The exported folders reload with plain transformers and give the same logits.
    ids = torch.tensor([[3, 17, 42, 5, 9, 60, 1, 33]])
    with torch.no_grad():
        single = AutoModelForCausalLM.from_pretrained(tmp_path / "single_hf").eval()(input_ids=ids).logits
        fsdp = AutoModelForCausalLM.from_pretrained(tmp_path / "fsdp_hf").eval()(input_ids=ids).logits
    torch.testing.assert_close(fsdp, single, atol=1e-5, rtol=0)
    assert single.abs().max() > 0
