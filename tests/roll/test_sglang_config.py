"""SGLangEngineConfig -> sglang.Engine arguments, and what building an SGLang engine says on a machine without
sglang or CUDA."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from roll.engine.protocol import EngineError
from roll.engine.sglang import SGLangEngine, SGLangEngineConfig
from roll.engine.sglang.engine import model_max_context
from roll.engine.sglang.runtime import sglang_unavailable_reason


def test_server_args_pass_what_is_set_and_leave_the_rest_to_sglang() -> None:
    assert SGLangEngineConfig().server_args("/models/q") == {
        "model_path": "/models/q",
        "base_gpu_id": 0,
        "tp_size": 1,
        "ep_size": 1,
        "dtype": "bfloat16",
        "mem_fraction_static": 0.8,
        "disable_radix_cache": False,
        "enable_memory_saver": True,
        "enable_weights_cpu_backup": True,
        "random_seed": 0,
        "log_level": "error",
    }
    config = SGLangEngineConfig(
        tp_size=4, ep_size=4, max_running_requests=256, context_length=32768, chunked_prefill_size=8192
    )
    args = config.server_args("/m", base_gpu_id=4)
    assert args["base_gpu_id"] == 4
    assert (args["tp_size"], args["ep_size"], args["max_running_requests"]) == (4, 4, 256)
    assert (args["context_length"], args["chunked_prefill_size"]) == (32768, 8192)


def test_bad_values_and_unknown_keys_are_refused() -> None:
    with pytest.raises(ValidationError, match="mem_fraction_static"):
        SGLangEngineConfig(mem_fraction_static=1.0)
    with pytest.raises(ValidationError, match="weight_update"):
        SGLangEngineConfig(weight_update="ipc")
    with pytest.raises(ValidationError, match="max_batch_size"):
        SGLangEngineConfig.model_validate({"type": "sglang", "max_batch_size": 8})


def test_config_imports_without_torch_or_sglang() -> None:
    code = (
        "import sys; from roll.engine.sglang import SGLangEngineConfig, SGLangEngine; "
        "print(sorted(m for m in ('torch', 'sglang') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_max_context_from_the_model_folder_or_the_config(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 40960}))
    assert model_max_context(tmp_path, SGLangEngineConfig()) == 40960
    assert model_max_context(tmp_path, SGLangEngineConfig(context_length=8192)) == 8192


def test_building_without_sglang_or_cuda_says_what_to_do(tmp_path: Path) -> None:
    reason = sglang_unavailable_reason()
    if reason is None:
        pytest.skip("sglang and CUDA are both present here")
    with pytest.raises(EngineError) as caught:
        SGLangEngine(tmp_path)
    message = str(caught.value)
    assert reason in message
    assert "pip install 'ale[gpu]'" in message and "engines.engine.type: torch" in message
