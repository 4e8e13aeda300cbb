"""What every route of one server needs: the engine, the model's tokenizer and the metrics."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from roll.engine.protocol import InferenceEngine
from roll.engine.server.errors import APIError
from roll.engine.server.metrics import ServerMetrics

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


class ServedModel(Protocol):
    """What the server needs of a model: its name and tokenizer (a `LoadedModel`, or a front over engines
    that hold the weights elsewhere)."""

    @property
    def model_id(self) -> str: ...

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase: ...


@dataclass
class ServerState:
    engine: InferenceEngine
    loaded: ServedModel
    metrics: ServerMetrics
    created: int = field(default_factory=lambda: int(time.time()))

    @property
    def model_id(self) -> str:
        return self.loaded.model_id

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase:
        return self.loaded.tokenizer

    def check_model(self, requested: str) -> None:
        if requested != self.model_id:
            raise APIError(
                f"The model `{requested}` does not exist: this server serves only `{self.model_id}` "
                "(see GET /v1/models).",
                status=404,
                param="model",
                code="model_not_found",
            )


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"
