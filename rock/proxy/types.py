"""Configuration and wire types of the ModelProxyService, shared by the service and its client."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ProxyMode = Literal["train", "deploy", "replay"]

EPISODE_HEADER = "x-rock-episode"
SANDBOX_HEADER = "x-rock-sandbox"


class ProxyConfig(BaseModel):
    """How the proxy answers: which mode, which upstream, where recordings go."""

    model_config = ConfigDict(extra="forbid")

    mode: ProxyMode = Field("train", description="train (engine + chunks), deploy (upstream API), replay")
    upstream_url: str | None = Field(
        None, description="OpenAI-compatible base URL ending in /v1: the engine (train) or the API (deploy)"
    )
    api_key: str | None = Field(None, description="Bearer key sent upstream (deploy)")
    model: str | None = Field(
        None,
        description="Model name sent upstream; None keeps the agent's (deploy) "
        "or asks the engine's /v1/models (train)",
    )
    record_path: Path | None = Field(None, description="JSONL file each deploy call is appended to")
    request_extra: dict[str, Any] = Field(
        default_factory=dict,
        description="Deploy mode: fields added to every upstream request, e.g. {'return_token_ids': true} "
        "when the upstream is a ROLL engine server, so the recording carries token ids",
    )
    replay_path: Path | None = Field(None, description="JSONL recording answered from, in order (replay)")
    max_tokens: int | None = Field(
        None,
        ge=1,
        description="Train mode: cap on each call's output tokens (the agent's own limit if lower)",
    )
    temperature: float | None = Field(
        None, ge=0, description="Train mode: sampling temperature for every call (None: the agent's)"
    )
    top_p: float | None = Field(
        None, gt=0, le=1, description="Train mode: nucleus sampling mass for every call (None: the agent's)"
    )
    top_k: int | None = Field(
        None, ge=0, description="Train mode: top-k for every call, 0 off (None: the agent's)"
    )
    stop: list[str] = Field(
        default_factory=list,
        description="Train mode: stop strings added to every call's own (a call ends at the first; its "
        "token ids keep the stop string's tokens, its text ends before it)",
    )
    max_retries: int = Field(4, ge=0, description="Retries of a 429/5xx or unreachable upstream (deploy)")
    backoff_s: float = Field(0.5, ge=0, description="First retry delay; doubles each retry")
    timeout_s: float = Field(600.0, gt=0, description="Read timeout of one upstream call")
    max_chunks_per_episode: int = Field(
        256,
        ge=1,
        description="Train mode: recorded calls per episode; later calls are refused (and counted) so code "
        "in a sandbox cannot flood an episode with chunks",
    )

    @model_validator(mode="after")
    def _mode_needs(self) -> ProxyConfig:
        if self.mode in ("train", "deploy") and not self.upstream_url:
            raise ValueError(
                f"mode {self.mode!r} needs upstream_url (the engine's or the API's /v1 base URL)"
            )
        if self.mode == "replay" and self.replay_path is None:
            raise ValueError("mode 'replay' needs replay_path (a JSONL recording made in deploy mode)")
        return self


class EpisodeOpen(BaseModel):
    """Open an episode; the agent's `context` settings make the proxy's thresholds match the agent's."""

    model_config = ConfigDict(extra="forbid")

    episode_id: str | None = Field(None, description="None: the proxy picks one")
    sandbox_id: str | None = Field(None, description="Requests from this sandbox's socket belong to it")
    context: dict[str, Any] = Field(default_factory=dict, description="iflow ContextConfig (settings keys)")
    max_chunks: int | None = Field(
        None, ge=1, description="This episode's chunk cap (e.g. the agent's max turns), at most the proxy's"
    )


class Chunk(BaseModel):
    """One LLM call: its context, the generated tokens and what the engine said about them."""

    model_config = ConfigDict(extra="forbid")

    context_ids: list[int] = Field(min_length=1, description="Token ids the model was conditioned on.")
    output_ids: list[int] = Field(min_length=1, description="Token ids the engine generated.")
    output_logprobs: list[float] | None = Field(
        None,
        description="Engine logprob (mu) of each generated token; None for data without them "
        "(SFT, expert demonstrations): the mismatch mask then lets the chunk through.",
    )
    weight_version: int = Field(0, description="Version of the weights that generated the chunk.")
    error: bool = Field(False, description="The tool call this chunk made failed.")
    relevant: bool = Field(True, description="Task-aware context mask: False drops the chunk from losses.")
    truncated: bool = Field(False, description="The engine stopped at the token cap (finish: length).")
    expert: bool = Field(False, description="Expert demonstration before a resampling fork (imitation).")

    @model_validator(mode="after")
    def _logprobs_match_outputs(self) -> Chunk:
        if self.output_logprobs is not None and len(self.output_logprobs) != len(self.output_ids):
            raise ValueError(
                f"chunk has {len(self.output_ids)} output ids but {len(self.output_logprobs)} logprobs; "
                "pass one engine logprob per generated token (or none)"
            )
        return self


class RecordedChunk(BaseModel):
    """One model call of an episode (train mode): the chunk and how it came about."""

    chunk: Chunk
    messages: list[dict[str, Any]] = Field(description="The prepared messages sent to the engine")
    answer: dict[str, Any] = Field(default_factory=dict, description="The assistant message sent back")
    tools: list[dict[str, Any]] | None = None
    finish_reason: str | None = None
    latency_s: float
    summarized: bool = Field(False, description="The proxy summarized the history before this call")


RefusalReason = Literal["not_continued", "tools_changed", "chunk_cap", "extra_summary", "concurrent"]


class EpisodeRecord(BaseModel):
    episode_id: str
    sandbox_id: str | None = None
    ended: bool = False
    chunks: list[RecordedChunk] = Field(default_factory=list)
    refused_calls: int = Field(
        0,
        description="Train-mode calls refused for this episode (a call that did not continue its context, "
        "one past the chunk cap, ...): more than 0 means something besides the agent called the model",
    )
    refusals: dict[RefusalReason, int] = Field(default_factory=dict, description="refused_calls by reason")


class AttachSocket(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="Host path of the unix socket to listen on (the sandbox's model.sock)")
    episode_id: str | None = Field(
        None,
        description="Requests on this socket belong to this episode (else to the sandbox's open episode)",
    )


class Recording(BaseModel):
    """One line of a deploy-mode JSONL recording: the request and the whole answer (streams assembled)."""

    request: dict[str, Any]
    response: dict[str, Any]
    episode_id: str | None = None
    latency_s: float = 0.0
