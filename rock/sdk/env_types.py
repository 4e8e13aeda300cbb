"""Wire types of the environment routes (`make`, `reset`, `step`, `close`, `list`), shared with the client."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class MakeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    env_id: str = Field(description="A registered GEM id (`game:Sudoku-v0-easy`)")
    kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Passed to the environment's constructor"
    )


class MakeResponse(BaseModel):
    handle: str
    env_id: str


class ResetRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    seed: int | None = None


class ResetResponse(BaseModel):
    observation: Any
    info: dict[str, Any] = Field(default_factory=dict)


class StepRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    action: Any


class StepResponse(BaseModel):
    observation: Any
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any] = Field(default_factory=dict)


class OpenEnv(BaseModel):
    handle: str
    env_id: str


class EnvList(BaseModel):
    open: list[OpenEnv]
    registered: list[str] = Field(description="GEM ids this host knows")


class EnvErrorInfo(BaseModel):
    type: str = Field(description="EnvError, EnvNotFound or UnknownEnvId")
    message: str


class EnvErrorBody(BaseModel):
    """The JSON of an environment's error (the client raises the class named by `type` again)."""

    error: EnvErrorInfo
