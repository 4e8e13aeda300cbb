"""Request bodies of the OpenAI-compatible API, plus ROLL's extension `return_token_ids`.

Unknown fields are rejected, as the OpenAI API does, so a typo never silently changes sampling. Fields the
engine cannot honour are accepted only at their neutral value.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class StreamOptions(BaseModel):
    # Newer clients add presentation-only options here (e.g. include_obfuscation); they change no tokens.
    model_config = ConfigDict(extra="ignore")

    include_usage: bool = False


class SamplingFields(BaseModel):
    """What chat and text completions share."""

    model_config = ConfigDict(extra="forbid")

    model: str
    n: int = Field(1, ge=1, le=64)
    stop: str | list[str] | None = None
    max_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    top_k: int | None = Field(None, ge=0, description="Extension: keep the k most likely tokens (0 is off).")
    seed: int | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = None
    frequency_penalty: float | None = Field(None, description="Only 0 is supported.")
    presence_penalty: float | None = Field(None, description="Only 0 is supported.")
    logit_bias: dict[str, float] | None = Field(None, description="Not supported; omit or pass {}.")
    return_token_ids: bool = Field(
        False,
        description="Extension: add prompt_token_ids, and per choice token_ids, token_logprobs and the "
        "weight_version, so callers can train on exactly the sampled tokens.",
    )

    @model_validator(mode="after")
    def _neutral_unsupported(self) -> SamplingFields:
        for name in ("frequency_penalty", "presence_penalty"):
            if getattr(self, name) not in (None, 0, 0.0):
                raise ValueError(f"{name} is not supported by this server; omit it or pass 0")
        if self.logit_bias:
            raise ValueError("logit_bias is not supported by this server; omit it")
        if isinstance(self.stop, list) and len(self.stop) > 16:
            raise ValueError("stop takes at most 16 strings")
        return self

    def stop_strings(self) -> list[str]:
        stops = [self.stop] if isinstance(self.stop, str) else self.stop or []
        return [stop for stop in stops if stop]  # an empty stop string would match everywhere


class ChatCompletionRequest(SamplingFields):
    messages: list[dict[str, Any]] = Field(min_length=1)
    tools: list[dict[str, Any]] | None = None
    tool_choice: Literal["none", "auto", "required"] | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    max_completion_tokens: int | None = Field(None, ge=1)
    logprobs: bool = False
    top_logprobs: int | None = Field(None, ge=0, le=20)
    response_format: dict[str, Any] | None = Field(None, description='Only {"type": "text"} is supported.')
    # OpenAI's bookkeeping and routing fields: accepted, they change no tokens.
    store: bool | None = None
    metadata: dict[str, str] | None = None
    service_tier: str | None = None
    prompt_cache_key: str | None = None
    safety_identifier: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> ChatCompletionRequest:
        if self.top_logprobs and not self.logprobs:
            raise ValueError("top_logprobs needs logprobs set to true")
        if self.response_format not in (None, {"type": "text"}):
            raise ValueError('response_format: only {"type": "text"} is supported by this server')
        if self.max_tokens is not None and self.max_completion_tokens is not None:
            raise ValueError("pass max_completion_tokens or max_tokens, not both")
        return self

    def output_limit(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens


class CompletionRequest(SamplingFields):
    prompt: str | list[int] | list[str] | list[list[int]]
    max_tokens: int | None = Field(16, ge=1)
    logprobs: int | None = Field(None, ge=0, le=20, description="Return this many alternatives per token.")
    echo: bool = Field(False, description="Only false is supported.")
    suffix: str | None = Field(None, description="Not supported.")
    best_of: int | None = Field(None, description="Only best_of = n is supported.")

    @model_validator(mode="after")
    def _supported(self) -> CompletionRequest:
        if self.echo:
            raise ValueError("echo is not supported by this server; omit it")
        if self.suffix:
            raise ValueError("suffix is not supported by this server; omit it")
        if self.best_of not in (None, self.n):
            raise ValueError("best_of other than n is not supported by this server; omit it")
        if isinstance(self.prompt, list) and not self.prompt:
            raise ValueError("prompt must not be empty")
        return self

    def prompts(self) -> list[str | list[int]]:
        """The prompt as a list: one string or token-id list per prompt."""
        if isinstance(self.prompt, str):
            return [self.prompt]
        if all(isinstance(item, int) for item in self.prompt):
            return [list(self.prompt)]  # type: ignore[arg-type]
        return list(self.prompt)  # type: ignore[arg-type]
