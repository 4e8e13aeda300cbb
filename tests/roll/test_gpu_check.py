"""The prepared GPU check, run on the CPU: scripts/gpu_check.sh with ALE_GPU_CHECK_DEVICE=cpu runs the same
torch engine and trainer checks as on CUDA, and says honestly what it skipped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(args: list[str], tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    report = tmp_path / "gpu_check.json"
    done = subprocess.run(
        [*args, "--json", str(report)],
        cwd=ROOT,
        env={**os.environ, "PYTHON": sys.executable, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )
    return done, json.loads(report.read_text()) if report.exists() else {}


@pytest.mark.slow
def test_gpu_check_script_passes_the_torch_checks_on_cpu(tmp_path: Path) -> None:
    done, report = _run(["scripts/gpu_check.sh"], tmp_path, ALE_GPU_CHECK_DEVICE="cpu")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = {row["name"]: row for row in report["rows"]}
    assert report["device"] == "cpu" and report["model"] == "builtin:tiny-qwen3-moe"
    for name in (
        "environment",
        "torch engine: greedy = transformers",
        "torch trainer: IPA step + weight sync",
    ):
        assert rows[name]["status"] == "pass", rows[name]
    assert (
        "64 greedy tokens equal transformers generate"
        in rows["torch engine: greedy = transformers"]["detail"]
    )
    assert rows["megatron"] == {**rows["megatron"], "status": "skip"}
    assert "CUDA" in rows["megatron"]["detail"]
    assert rows["sglang"]["status"] == "skip" and rows["sglang"]["detail"] == "sglang is not installed"
    assert "ALE GPU check on cpu" in done.stdout
    assert json.loads(done.stdout.strip().splitlines()[-1]) == report


def test_a_failed_check_fails_the_run_and_says_why(tmp_path: Path) -> None:
    missing = tmp_path / "no-model"
    done, report = _run(
        [sys.executable, "-m", "roll.gpu_check", "--device", "cpu", "--model", str(missing)], tmp_path
    )
    assert done.returncode == 1
    statuses = {row["name"]: (row["status"], row["detail"]) for row in report["rows"]}
    status, detail = statuses["torch engine: greedy = transformers"]
    assert status == "FAIL" and "ModelNotFoundError" in detail and str(missing) in detail
    assert statuses["environment"][0] == "pass"


def test_cuda_requested_without_cuda_is_refused(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    done, report = _run([sys.executable, "-m", "roll.gpu_check", "--device", "cuda"], tmp_path)
    assert done.returncode == 2 and report == {}
    assert "--device cpu" in done.stderr


def test_external_rows_show_none_as_skip_and_false_as_fail() -> None:
    from roll.gpu_check import _external_rows

    rows = _external_rows(
        "megatron",
        "m",
        "megatron-core",
        "cuda",
        lambda: [("a", True, "ok"), ("b", None, "needs two GPUs"), ("c", False, "diff 1e-1")],
    )
    assert [(row.name, row.status, row.detail) for row in rows] == [
        ("megatron: a", "pass", "ok"),
        ("megatron: b", "skip", "needs two GPUs"),
        ("megatron: c", "FAIL", "diff 1e-1"),
    ]
