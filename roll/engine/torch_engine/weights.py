"""Weight updates and the sleep/wake offload of a model's parameters."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from transformers import PreTrainedModel

from roll.engine.protocol import EngineError


def read_weights(
    source: Mapping[str, torch.Tensor] | Path, model: PreTrainedModel
) -> Mapping[str, torch.Tensor]:
    """A state dict given directly (named as the model's own parameters), or the weights of a model folder.

    A folder is loaded through transformers, which maps checkpoint names to the model's own (transformers 5
    stores MoE experts differently on disk than in memory).
    """
    if not isinstance(source, Path):
        return source
    if not (source / "config.json").is_file() or not any(source.glob("*.safetensors")):
        raise EngineError(
            f"{source} is not a model folder with config.json and *.safetensors: pass a folder written by "
            "save_pretrained, or a state dict of tensors"
        )
    dtype = next(model.parameters()).dtype
    return type(model).from_pretrained(source, dtype=dtype).state_dict()


def load_into(model: torch.nn.Module, state: Mapping[str, torch.Tensor]) -> None:
    """Copy `state` into the model's tensors in place (tied weights stay tied); a partial state is allowed."""
    targets = dict(model.named_parameters(remove_duplicate=False))
    targets.update(model.named_buffers(remove_duplicate=False))
    unknown = [name for name in state if name not in targets]
    if unknown:
        raise EngineError(
            f"{len(unknown)} weight names are not in the model, e.g. {unknown[:3]}; "
            f"expected names like {list(targets)[:3]}"
        )
    for name, tensor in state.items():
        target = targets[name]
        if tuple(target.shape) != tuple(tensor.shape):
            raise EngineError(
                f"weight {name} has shape {tuple(tensor.shape)} but the model expects {tuple(target.shape)}"
            )
    with torch.no_grad():
        for name, tensor in state.items():
            targets[name].copy_(tensor.to(dtype=targets[name].dtype))


class OffloadedWeights:
    """A model's parameters moved out of its device: to a safetensors file when the model lives in host memory
    (keeping a host copy would free nothing), to host memory when it lives on an accelerator."""

    def __init__(self, model: torch.nn.Module) -> None:
        self._params = dict(model.named_parameters())
        self._device = next(iter(self._params.values())).device
        self._host: dict[str, torch.Tensor] | None = None
        self._folder: tempfile.TemporaryDirectory[str] | None = None
        tensors = {name: p.data for name, p in self._params.items()}
        if self._device.type == "cpu":
            self._folder = tempfile.TemporaryDirectory(prefix="roll-engine-sleep-")
            save_file({n: t.contiguous() for n, t in tensors.items()}, self._file)
        else:
            self._host = {name: t.to("cpu") for name, t in tensors.items()}
        for p in self._params.values():
            p.data = torch.empty(0, dtype=p.dtype, device=self._device)

    @property
    def _file(self) -> str:
        assert self._folder is not None
        return str(Path(self._folder.name) / "weights.safetensors")

    def restore(self) -> None:
        saved = self._host if self._host is not None else load_file(self._file)
        for name, p in self._params.items():
            p.data = saved[name].to(self._device)
        if self._folder is not None:
            self._folder.cleanup()
