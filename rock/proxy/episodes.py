"""Episodes: the agent's context settings, the context cache and the recorded chunks of each one."""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field

from iflow.types import ContextConfig, ContextState
from rock.proxy.errors import ProxyError
from rock.proxy.types import EpisodeOpen, EpisodeRecord, RecordedChunk


@dataclass
class Episode:
    record: EpisodeRecord
    context: ContextConfig
    state: ContextState = field(default_factory=ContextState)


class EpisodeStore:
    """Thread-safe map of episodes, and of each sandbox to its current episode."""

    def __init__(self) -> None:
        self._episodes: dict[str, Episode] = {}
        self._by_sandbox: dict[str, str] = {}
        self._lock = threading.Lock()

    def open(self, request: EpisodeOpen) -> Episode:
        episode_id = request.episode_id or f"ep-{uuid.uuid4().hex[:12]}"
        try:
            context = ContextConfig.model_validate(request.context)
        except ValueError as error:
            raise ProxyError(f"context: not a valid iflow ContextConfig: {error}", status=422) from error
        with self._lock:
            if episode_id in self._episodes:
                raise ProxyError(
                    f"episode {episode_id!r} exists already; pick another id",
                    status=409,
                    code="episode_exists",
                )
            episode = Episode(EpisodeRecord(episode_id=episode_id, sandbox_id=request.sandbox_id), context)
            self._episodes[episode_id] = episode
            if request.sandbox_id:
                self._by_sandbox[request.sandbox_id] = episode_id
        return episode

    def get(self, episode_id: str) -> Episode:
        with self._lock:
            episode = self._episodes.get(episode_id)
        if episode is None:
            raise ProxyError(
                f"no episode {episode_id!r}; open it first with POST /episodes",
                status=404,
                code="episode_not_found",
            )
        return episode

    def for_sandbox(self, sandbox_id: str) -> Episode:
        with self._lock:
            episode_id = self._by_sandbox.get(sandbox_id)
        if episode_id is None:
            raise ProxyError(
                f"sandbox {sandbox_id!r} has no open episode; open one with POST /episodes "
                "naming the sandbox",
                status=404,
                code="episode_not_found",
            )
        return self.get(episode_id)

    def add(self, episode: Episode, chunk: RecordedChunk) -> None:
        with self._lock:
            if episode.record.ended:
                raise ProxyError(
                    f"episode {episode.record.episode_id!r} has ended; open a new one",
                    status=409,
                    code="episode_ended",
                )
            episode.record.chunks.append(chunk)

    def end(self, episode_id: str) -> EpisodeRecord:
        episode = self.get(episode_id)
        with self._lock:
            episode.record.ended = True
            sandbox = episode.record.sandbox_id
            if sandbox and self._by_sandbox.get(sandbox) == episode_id:
                del self._by_sandbox[sandbox]
            return episode.record.model_copy(deep=True)

    def drop(self, episode_id: str) -> None:
        with self._lock:
            self._episodes.pop(episode_id, None)
