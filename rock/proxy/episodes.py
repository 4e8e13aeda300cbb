"""Episodes: the agent's context settings, the context cache and the recorded chunks of each one."""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from iflow.context import ContextConfig, ContextState
from rock.proxy.continuity import continuation_error, is_summary_request, opens_subagent, subagent_prompts
from rock.proxy.errors import ProxyError
from rock.proxy.types import EpisodeOpen, EpisodeRecord, RecordedChunk, RefusalReason

DEFAULT_MAX_CHUNKS = 256


@dataclass
class Thread:
    """One conversation of an episode (the agent's, or one of its sub-agents'): what its last recorded call
    sent (before the proxy prepared it), the answer it got and its tools. Its next call must continue it."""

    sent: list[dict[str, Any]]
    answer: dict[str, Any]
    tools: Any
    opened: set[int] = field(default_factory=set)  # its answer's `task` calls that opened a sub-agent


@dataclass
class Episode:
    record: EpisodeRecord
    context: ContextConfig
    max_chunks: int = DEFAULT_MAX_CHUNKS
    state: ContextState = field(default_factory=ContextState)
    threads: list[Thread] = field(default_factory=list)  # the first is the agent's own
    last_thread: int | None = None  # the thread of the last recorded chunk
    # Summaries answered since the last chunk (at most one: iflow asks for one before its next call).
    summaries: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Admission:
    """A call let through: a summary call (answered, never recorded), the next chunk (number `turn`) of
    `thread` (None: a new one, `parent` naming the thread and `task` call that opened it), or a retry of the
    last call (`retry`: its chunk, number `turn`, is replaced)."""

    summary: bool
    turn: int
    retry: bool = False
    thread: int | None = None
    parent: tuple[int, int] | None = None


class EpisodeStore:
    """Thread-safe map of episodes, and of each sandbox to its current episode."""

    def __init__(self, max_chunks: int = DEFAULT_MAX_CHUNKS) -> None:
        self.max_chunks = max_chunks
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
            episode = Episode(
                EpisodeRecord(episode_id=episode_id, sandbox_id=request.sandbox_id),
                context,
                max_chunks=min(request.max_chunks or self.max_chunks, self.max_chunks),
            )
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

    def admit(self, episode: Episode, body: dict[str, Any]) -> Admission:
        """Let a call through when it continues the episode's context (see rock.proxy.continuity) and the
        episode has room; otherwise count the refusal on the episode's record and raise."""
        messages = body["messages"]
        with self._lock:
            self._check_open(episode)
            turn = len(episode.record.chunks)
            if is_summary_request(messages):
                if episode.summaries:  # iflow asks for one before a call (a long expert prefix: the first)
                    self._refuse(
                        episode, "extra_summary", "a summary call is answered once between two calls"
                    )
                return Admission(summary=True, turn=turn)
            last = None if episode.last_thread is None else episode.threads[episode.last_thread]
            if last is not None and messages == last.sent and not episode.summaries:
                # The agent asking again (its connection dropped before the answer reached it): the new
                # answer replaces the last chunk, since the agent goes on from that one.
                if body.get("tools") != last.tools:
                    self._refuse(episode, "tools_changed", "its tools differ from its thread's")
                return Admission(summary=False, turn=turn - 1, retry=True, thread=episode.last_thread)
            if turn >= episode.max_chunks:
                self._refuse(
                    episode,
                    "chunk_cap",
                    f"the episode has its {episode.max_chunks} chunks (the cap); end it and open a new one",
                )
            if not episode.threads:
                return Admission(summary=False, turn=turn)  # the agent's first call roots the episode
            return self._continued(episode, body, turn)

    def _continued(self, episode: Episode, body: dict[str, Any], turn: int) -> Admission:
        """The thread the call continues, or the sub-agent thread it opens; refused otherwise."""
        messages, tools = body["messages"], body.get("tools")
        order = sorted(range(len(episode.threads)), key=lambda i: i != episode.last_thread)
        reason = None
        for index in order:
            thread = episode.threads[index]
            why = continuation_error(thread.sent, thread.answer, messages, episode.summaries, episode.context)
            if why is None:
                if tools != thread.tools:
                    self._refuse(episode, "tools_changed", "its tools differ from its thread's")
                return Admission(summary=False, turn=turn, thread=index)
            reason = reason or why
        for index in order:
            thread = episode.threads[index]
            for call, prompt in enumerate(subagent_prompts(thread.answer)):
                if call not in thread.opened and opens_subagent(prompt, messages):
                    if not all(tool in (thread.tools or []) for tool in tools or []):
                        self._refuse(episode, "tools_changed", "a sub-agent's tools must be its parent's")
                    return Admission(summary=False, turn=turn, parent=(index, call))
        self._refuse(episode, "not_continued", reason or "it continues no thread of the episode")
        raise AssertionError("unreachable: _refuse raises")

    def add_summary(self, episode: Episode, summary: str) -> None:
        with self._lock:
            episode.summaries.append(summary)

    def add(
        self,
        episode: Episode,
        chunk: RecordedChunk,
        sent: list[dict[str, Any]],
        tools: Any,
        admission: Admission,
    ) -> None:
        """Record the chunk of an admitted call, unless another call of the episode was recorded while it
        ran (then both continued the same context, and only the first is the episode's)."""
        with self._lock:
            self._check_open(episode)
            if len(episode.record.chunks) != admission.turn + admission.retry:
                self._refuse(episode, "concurrent", "another call continued the same context first")
            del episode.record.chunks[admission.turn :]
            episode.record.chunks.append(chunk)
            thread = Thread(sent, chunk.answer, tools)
            if admission.thread is None:
                if admission.parent is not None:
                    parent, call = admission.parent
                    episode.threads[parent].opened.add(call)
                episode.threads.append(thread)
                episode.last_thread = len(episode.threads) - 1
            else:  # a retry's new answer opens its own sub-agents: the agent never saw the old one
                episode.threads[admission.thread] = thread
                episode.last_thread = admission.thread
            episode.summaries = []

    @staticmethod
    def _check_open(episode: Episode) -> None:
        if episode.record.ended:
            raise ProxyError(
                f"episode {episode.record.episode_id!r} has ended; open a new one",
                status=409,
                code="episode_ended",
            )

    @staticmethod
    def _refuse(episode: Episode, reason: RefusalReason, why: str) -> None:
        """Count a refused call (the caller holds the lock) and raise its error."""
        record = episode.record
        record.refused_calls += 1
        record.refusals[reason] = record.refusals.get(reason, 0) + 1
        raise ProxyError(
            f"episode {record.episode_id!r} does not record this call: {why}",
            status=409,
            code=f"refused_{reason}",
        )

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
