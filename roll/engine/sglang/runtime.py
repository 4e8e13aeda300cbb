"""Every call into SGLang, in one place (imported only when an SGLang engine is built).

We drive SGLang's offline engine (`sglang.Engine`, python/sglang/srt/entrypoints/engine.py) from our own event
loop. Its generate API is async (`Engine.async_generate`); its control methods (`update_weights_from_tensor`,
`release_memory_occupation`, ...) are sync wrappers that run `TokenizerManager` coroutines with
`loop.run_until_complete`, which cannot run inside a running loop. So, as those wrappers do, we build the
request objects of python/sglang/srt/managers/io_struct.py and await the same `TokenizerManager` coroutines
(`tokenizer_manager.<method>(request, None)`), on the loop that also runs generation.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from roll.engine.protocol import EngineError
from roll.engine.sglang.translate import distributed_update_kwargs
from roll.types import TensorSpec

INSTALL_HINT = (
    "install the GPU extra (`pip install 'ale[gpu]'`, which brings sglang) on a machine with a CUDA GPU, "
    "or use `engines.engine.type: torch` (the embedded engine, CPU or one GPU)"
)


def sglang_unavailable_reason() -> str | None:
    """Why an SGLang engine cannot start here (None if it can): sglang missing, or no CUDA device."""
    if importlib.util.find_spec("sglang") is None:
        return "sglang is not installed"
    import torch

    if not torch.cuda.is_available():
        return "no CUDA device is visible (SGLang's engine runs on GPUs only)"
    return None


def require_sglang() -> None:
    reason = sglang_unavailable_reason()
    if reason is not None:
        raise EngineError(f"The sglang engine cannot start: {reason}; {INSTALL_HINT}.")


def launch(server_args: dict[str, Any]) -> Any:
    """Start SGLang's scheduler and detokenizer processes and load the model (blocks for the whole load)."""
    import sglang

    return sglang.Engine(**server_args)


def _check(result: Any, what: str) -> None:
    """SGLang's control calls answer (success, message, ...), an object with .success/.message, or nothing."""
    if isinstance(result, tuple):
        success, message = bool(result[0]), str(result[1]) if len(result) > 1 else ""
    else:
        success, message = bool(getattr(result, "success", True)), str(getattr(result, "message", ""))
    if not success:
        raise EngineError(f"SGLang {what} failed: {message}")


async def update_from_tensors(
    engine: Any, named: Sequence[tuple[str, Any]], tp_size: int, *, flush: bool
) -> None:
    """`Engine.update_weights_from_tensor`: tensors serialized once per TP rank (CUDA tensors travel as IPC
    handles, so the scheduler on the same GPU maps them without a copy)."""
    from sglang.srt.managers.io_struct import UpdateWeightsFromTensorReqInput
    from sglang.srt.utils import MultiprocessingSerializer

    payload = [MultiprocessingSerializer.serialize(list(named)) for _ in range(tp_size)]
    request = UpdateWeightsFromTensorReqInput(
        serialized_named_tensors=payload, load_format=None, flush_cache=flush
    )
    _check(
        await engine.tokenizer_manager.update_weights_from_tensor(request, None), "update_weights_from_tensor"
    )


async def update_from_disk(engine: Any, folder: Path) -> None:
    """`Engine.update_weights_from_disk`: reload every weight from a Hugging Face folder of the same model."""
    from sglang.srt.managers.io_struct import UpdateWeightFromDiskReqInput

    request = UpdateWeightFromDiskReqInput(model_path=str(folder))
    _check(await engine.tokenizer_manager.update_weights_from_disk(request, None), "update_weights_from_disk")


async def init_weight_group(
    engine: Any,
    master_address: str,
    master_port: int,
    rank_offset: int,
    world_size: int,
    group_name: str,
    backend: str,
) -> None:
    """`Engine.init_weights_update_group`: join a group whose rank 0 is the trainer's sender."""
    from sglang.srt.managers.io_struct import InitWeightsUpdateGroupReqInput

    request = InitWeightsUpdateGroupReqInput(
        master_address=master_address,
        master_port=master_port,
        rank_offset=rank_offset,
        world_size=world_size,
        group_name=group_name,
        backend=backend,
    )
    _check(
        await engine.tokenizer_manager.init_weights_update_group(request, None), "init_weights_update_group"
    )


async def update_from_group(
    engine: Any, specs: Sequence[TensorSpec], group_name: str, *, flush: bool
) -> None:
    """`Engine.update_weights_from_distributed`: receive these tensors, broadcast in order from rank 0."""
    from sglang.srt.managers.io_struct import UpdateWeightsFromDistributedReqInput

    request = UpdateWeightsFromDistributedReqInput(
        **distributed_update_kwargs(specs, group_name, flush_cache=flush)
    )
    _check(
        await engine.tokenizer_manager.update_weights_from_distributed(request, None),
        "update_weights_from_distributed",
    )


async def release_memory(engine: Any) -> None:
    """`Engine.release_memory_occupation`: free weights and KV cache on the GPU (needs the memory saver)."""
    from sglang.srt.managers.io_struct import ReleaseMemoryOccupationReqInput

    result = await engine.tokenizer_manager.release_memory_occupation(ReleaseMemoryOccupationReqInput(), None)
    _check(result, "release_memory_occupation")


async def resume_memory(engine: Any) -> None:
    """`Engine.resume_memory_occupation`: take the GPU memory back (and the weights, with the CPU backup)."""
    from sglang.srt.managers.io_struct import ResumeMemoryOccupationReqInput

    result = await engine.tokenizer_manager.resume_memory_occupation(ResumeMemoryOccupationReqInput(), None)
    _check(result, "resume_memory_occupation")


async def flush_cache(engine: Any) -> None:
    """`Engine.flush_cache`: drop the radix (prefix) cache (SGLang refuses while requests are running)."""
    _check(await engine.tokenizer_manager.flush_cache(), "flush_cache")


def abort(engine: Any, rid: str) -> None:
    """`TokenizerManager.abort_request`: the scheduler ends the request; its stream ends in an abort."""
    engine.tokenizer_manager.abort_request(rid=rid)
