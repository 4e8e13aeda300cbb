"""Train mode: iflow's context handling, the engine server with token ids, one chunk per call.

`TrainMode` is the chat route's train-mode branch (`rock.proxy.app`); `InProcessProxy` holds the same parts
(an `EpisodeStore` and a `TrainMode`) as a Python object, for an agent in the caller's own process: no HTTP,
but every call is checked as a call through HTTP is, since the agent is still the adversary.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from iflow.context import CharEstimateCounter, ContextState, apply_summary, prepare
from rock.proxy.episodes import DEFAULT_MAX_CHUNKS, Episode, EpisodeStore
from rock.proxy.errors import ProxyError
from rock.proxy.types import Chunk, EpisodeOpen, EpisodeRecord, RecordedChunk

if TYPE_CHECKING:
    from rock.proxy.types import ProxyConfig

# Fields of the agent's request that reach the engine; others (stream, n, logprobs) are the proxy's.
TOOL_FIELDS = ("tools", "tool_choice")
SAMPLING_FIELDS = (
    "temperature",
    "top_p",
    "top_k",
    "max_tokens",
    "max_completion_tokens",
    "stop",
    "seed",
)
TOKEN_FIELDS = ("token_ids", "token_logprobs", "weight_version")


@dataclass(frozen=True)
class Sampling:
    """How train mode samples every call, whatever the agent asks: the trainer's settings (None: the
    agent's). Stop strings are added to the agent's own."""

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stop: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, config: ProxyConfig) -> Sampling:
        return cls(config.temperature, config.top_p, config.top_k, list(config.stop))

    def apply(self, sampling: dict[str, Any]) -> dict[str, Any]:
        """The agent's sampling fields with these settings laid over them."""
        chosen = {"temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k}
        sampling = sampling | {key: value for key, value in chosen.items() if value is not None}
        asked = sampling.get("stop")
        # Anything but a string or a list is left for the engine's request validation to refuse.
        if self.stop and (asked is None or isinstance(asked, str | list)):
            own = [asked] if isinstance(asked, str) else list(asked or [])
            sampling["stop"] = own + [s for s in self.stop if s not in own]
        return sampling


class ChatEngine(Protocol):
    """What train mode generates with: ROLL's engine server over HTTP (`rock.proxy.upstream.Upstream`) or an
    engine in the caller's process. `chat` answers an OpenAI chat request with ROLL's `return_token_ids`
    extension (prompt and output token ids, logprobs, weight version) or raises a `ProxyError`; cancelling
    it stops the generation."""

    async def model(self) -> str: ...

    async def chat(self, request: dict[str, Any]) -> dict[str, Any]: ...


def check_messages(body: dict[str, Any]) -> None:
    """A chat request needs a non-empty list of messages."""
    if not isinstance(body.get("messages"), list) or not body["messages"]:
        raise ProxyError("messages: a non-empty list of chat messages is required", code="invalid_value")


class TrainMode:
    """Answers an episode's chat requests through the engine and records each as a `Chunk`.

    A call is recorded only when it continues the episode's context and the episode is under its chunk cap
    (`EpisodeStore.admit`); iflow's own summary calls are answered and not recorded.

    The counter is iflow's default (`CharEstimateCounter`), the one the agent uses, so compression
    thresholds fall on the same messages as in the agent. A summary the proxy asks the engine for (when the
    agent sent a history past the summary threshold) shapes the context but is not recorded as a chunk.
    """

    def __init__(
        self,
        engine: ChatEngine,
        store: EpisodeStore,
        max_tokens: int | None = None,
        sampling: Sampling | None = None,
    ) -> None:
        self.engine = engine
        self.max_tokens = max_tokens
        self.sampling = sampling or Sampling()
        self.store = store
        self.counter = CharEstimateCounter()

    async def complete(self, body: dict[str, Any], episode: Episode) -> dict[str, Any]:
        if body.get("n", 1) != 1:
            raise ProxyError("train mode answers n=1 only (one chunk per call); omit n", code="invalid_value")
        admission = self.store.admit(episode, body)
        started = time.perf_counter()
        sampling = self._sampling(body)
        if admission.summary:
            return await self._summary(body, episode, sampling)
        messages, summarized = await self._context(body["messages"], episode, sampling)
        request = sampling | {key: body[key] for key in TOOL_FIELDS if body.get(key) is not None}
        request |= {"model": await self.engine.model(), "messages": messages, "return_token_ids": True}
        response = await self.engine.chat(request)
        choice = response["choices"][0]
        if not choice.get("token_ids"):
            raise ProxyError(
                "the engine produced no tokens for this call; raise max_tokens",
                status=502,
                code="empty_completion",
            )
        chunk = Chunk(
            context_ids=response["prompt_token_ids"],
            output_ids=choice["token_ids"],
            output_logprobs=choice["token_logprobs"],
            weight_version=int(response.get("weight_version", 0)),
            truncated=choice.get("finish_reason") == "length",
        )
        self.store.add(
            episode,
            RecordedChunk(
                chunk=chunk,
                messages=messages,
                answer=choice.get("message") or {},
                tools=body.get("tools"),
                finish_reason=choice.get("finish_reason"),
                latency_s=time.perf_counter() - started,
                summarized=summarized,
            ),
            sent=body["messages"],
            tools=body.get("tools"),
            admission=admission,
        )
        return _openai_answer(response)

    async def _summary(
        self, body: dict[str, Any], episode: Episode, sampling: dict[str, Any]
    ) -> dict[str, Any]:
        """The agent's own summary call: answered and kept (the next call carries it), not a chunk."""
        response = await self.engine.chat(
            sampling | {"model": await self.engine.model(), "messages": body["messages"]},
        )
        summary = response["choices"][0]["message"].get("content") or ""
        if summary.strip():
            self.store.add_summary(episode, summary)
        return _openai_answer(response)

    def _sampling(self, body: dict[str, Any]) -> dict[str, Any]:
        """The agent's sampling fields under the proxy's sampling settings and output cap."""
        sampling = self.sampling.apply(
            {key: body[key] for key in SAMPLING_FIELDS if body.get(key) is not None}
        )
        if self.max_tokens is not None:
            asked = sampling.pop("max_completion_tokens", None) or sampling.get("max_tokens")
            sampling["max_tokens"] = min(asked or self.max_tokens, self.max_tokens)
        return sampling

    async def _context(
        self, messages: list[dict[str, Any]], episode: Episode, sampling: dict[str, Any]
    ) -> tuple[list[Any], bool]:
        """What iflow would send for this history: `prepare`, then a summary (sampled like the call) when it
        asks for one."""
        prepared = prepare(messages, episode.state, episode.context, counter=self.counter)
        episode.state = prepared.state
        request = prepared.summary_request
        if request is None:
            return list(prepared.messages), False
        reply = await self.engine.chat(
            sampling | {"model": await self.engine.model(), "messages": list(request.messages)},
        )
        summary = reply["choices"][0]["message"].get("content") or ""
        if not summary.strip():
            return list(prepared.messages), False  # as the agent does: keep the full history
        history, _ = apply_summary(request, summary, episode.context, self.counter)
        episode.state = ContextState()
        return list(history), True


def _openai_answer(response: dict[str, Any]) -> dict[str, Any]:
    """The engine's answer without ROLL's token extension, as any OpenAI client expects it."""
    answer = {key: value for key, value in response.items() if key not in ("prompt_token_ids", *TOKEN_FIELDS)}
    answer["choices"] = [
        {key: value for key, value in choice.items() if key not in TOKEN_FIELDS}
        for choice in response["choices"]
    ]
    return answer


class InProcessProxy:
    """Episodes and their chat calls; the methods match `ProxyClient`'s control calls, `chat` the route
    `POST /episodes/{id}/v1/chat/completions` (errors are `ProxyError`s, with the status it would answer)."""

    def __init__(
        self,
        engine: ChatEngine,
        max_tokens: int | None = None,
        sampling: Sampling | None = None,
        max_chunks_per_episode: int = DEFAULT_MAX_CHUNKS,
    ) -> None:
        self.store = EpisodeStore(max_chunks_per_episode)
        self.train = TrainMode(engine, self.store, max_tokens, sampling)

    def open_episode(
        self,
        episode_id: str | None = None,
        sandbox_id: str | None = None,
        context: dict[str, Any] | None = None,
        max_chunks: int | None = None,
    ) -> str:
        request = EpisodeOpen(
            episode_id=episode_id, sandbox_id=sandbox_id, context=context or {}, max_chunks=max_chunks
        )
        return self.store.open(request).record.episode_id

    def episode(self, episode_id: str) -> EpisodeRecord:
        return self.store.get(episode_id).record.model_copy(deep=True)

    def end_episode(self, episode_id: str) -> EpisodeRecord:
        record = self.store.end(episode_id)
        self.store.drop(episode_id)
        return record

    async def chat(self, episode_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """The whole answer (`chat.completion`, without ROLL's token fields) to an OpenAI chat request of the
        episode; a call that does not continue it, or one past its cap, is refused and counted."""
        # What crosses here is copied, as JSON over HTTP would be: the episode keeps what the agent sent, and
        # the agent's later changes to its own lists (it appends to its history) must not rewrite that.
        body = copy.deepcopy(body)
        check_messages(body)
        episode = self.store.get(episode_id)
        answer = await self.train.complete({k: v for k, v in body.items() if k != "stream"}, episode)
        return copy.deepcopy(answer)
