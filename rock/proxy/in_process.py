"""The train-mode proxy as a Python object, for an agent in the caller's own process (no HTTP).

`InProcessProxy` holds what the HTTP app's train mode holds (`rock.proxy.app`): an `EpisodeStore` (its
continuity checks, chunk cap and refusal counts) and a `TrainMode` (iflow's context handling, one chunk of
token ids, logprobs and weight version per call), in front of a `ChatEngine` the caller supplies (an engine
in its process, or `Upstream` over HTTP). Its `chat` is the chat route's train-mode branch: the agent is
still the adversary, so every call is checked as a call through HTTP is.
"""

from __future__ import annotations

import copy
from typing import Any

from rock.proxy.episodes import DEFAULT_MAX_CHUNKS, EpisodeStore
from rock.proxy.train import ChatEngine, Sampling, TrainMode, check_messages
from rock.proxy.types import EpisodeOpen, EpisodeRecord


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
