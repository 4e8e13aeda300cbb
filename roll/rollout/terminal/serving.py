"""What the agent of a rollout worker talks to: a train-mode ModelProxyService per engine and sampling.

An agent on the host (env.agent.placement: host) runs in a thread of the worker, so nothing between it and
the engine is a process boundary: its iflow client calls the proxy in this process (`HostProxy`), whose
engine is `roll serve`'s chat route called as a function over the engine front (`EngineChat`), on the
worker's event loop where the fronts live. No server, no socket.

An agent inside the sandbox reaches its model through the rocklet's forwarder to a unix socket the proxy
listens on, so there the proxy is the HTTP app, with `roll serve`'s app over the engine front behind it,
each on a loopback port in a thread (`AgentEndpoints.proxy_url`).
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from iflow.llm import EndpointError
from rock.proxy.errors import ProxyError
from rock.proxy.train import InProcessProxy, Sampling
from rock.proxy.types import EpisodeRecord
from roll.engine.server.loopback import LoopbackServer

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from roll.engine.protocol import InferenceEngine
    from roll.engine.server.state import ServedModel
    from roll.rollout.config import SamplingConfig
    from roll.rollout.engine_front import EngineFront


@dataclass(frozen=True)
class ServedTokenizer:
    """The model the front's server names (the weights live in the engine actors)."""

    model_id: str
    tokenizer: PreTrainedTokenizerBase


def proxy_sampling(sampling: SamplingConfig) -> Sampling:
    """The run's sampling as the train-mode proxy lays it over every agent call."""
    return Sampling(sampling.temperature, sampling.top_p, sampling.top_k, list(sampling.stop))


class EngineChat:
    """The train-mode proxy's engine (`rock.proxy.train.ChatEngine`) in this process: what `roll serve`'s
    `POST /v1/chat/completions` answers, computed by the same code without the server; the engine's error
    answers become the proxy's as they would over HTTP, and a cancelled call is aborted in the engine."""

    def __init__(self, engine: InferenceEngine, served: ServedModel) -> None:
        from roll.engine.server.metrics import ServerMetrics
        from roll.engine.server.state import ServerState

        self.state = ServerState(engine=engine, loaded=served, metrics=ServerMetrics(engine))

    async def model(self) -> str:
        return self.state.model_id

    async def chat(self, request: dict[str, Any]) -> dict[str, Any]:
        from pydantic import ValidationError

        from roll.engine.server.chat import complete_chat
        from roll.engine.server.errors import APIError, validation_error
        from roll.engine.server.schemas import ChatCompletionRequest

        try:
            try:
                body = ChatCompletionRequest.model_validate(request)
            except ValidationError as error:
                raise validation_error(error.errors()) from error
            return await complete_chat(self.state, body)
        except APIError as error:
            raise ProxyError(
                f"the engine answered {error.status}: {error.message}",
                status=error.status,
                code="upstream_error",
            ) from error


@dataclass(frozen=True)
class EpisodeEndpoint:
    """iflow's `ChatEndpoint` for one episode of an in-process proxy: the agent's thread waits while the call
    runs on `loop`; a call past its time is cancelled there (and so aborted in the engine)."""

    proxy: InProcessProxy
    episode_id: str
    loop: asyncio.AbstractEventLoop

    @property
    def name(self) -> str:
        return f"the in-process model proxy (episode {self.episode_id})"

    def chat(self, body: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        call = asyncio.run_coroutine_threadsafe(self.proxy.chat(self.episode_id, body), self.loop)
        try:
            return call.result(timeout=timeout_s)
        except TimeoutError:
            call.cancel()
            raise
        except ProxyError as error:
            raise EndpointError(str(error), error.status) from error


@dataclass(frozen=True)
class HostProxy:
    """An in-process train-mode proxy as the episode code on the agent's thread uses it: the episode calls of
    `ProxyClient`, and `endpoint`, the model of the episode's agent."""

    proxy: InProcessProxy
    loop: asyncio.AbstractEventLoop

    def open_episode(
        self,
        episode_id: str | None = None,
        sandbox_id: str | None = None,
        context: dict[str, Any] | None = None,
        max_chunks: int | None = None,
    ) -> str:
        return self.proxy.open_episode(episode_id, sandbox_id, context, max_chunks)

    def end_episode(self, episode_id: str) -> EpisodeRecord:
        return self.proxy.end_episode(episode_id)

    def endpoint(self, episode_id: str) -> EpisodeEndpoint:
        return EpisodeEndpoint(self.proxy, episode_id, self.loop)


class AgentEndpoints:
    """Per engine and sampling setting: a train-mode proxy, in this process for agents on the host, or as
    HTTP servers on loopback (with `roll serve`'s app per engine behind them) for agents in sandboxes."""

    def __init__(self, fronts: list[EngineFront], served: ServedTokenizer, max_call_s: float) -> None:
        self.fronts, self.served, self.max_call_s = fronts, served, max_call_s
        self._servers: dict[int, LoopbackServer] = {}
        self._proxies: dict[tuple[int, str], LoopbackServer] = {}
        self._in_process: dict[tuple[int, str], InProcessProxy] = {}
        self._sized: set[int] = set()
        self._lock = threading.Lock()

    def _front(self, engine: int) -> EngineFront:
        """The engine's front, its context length known (blocking the first time: call from a thread)."""
        if engine not in self._sized:
            self.fronts[engine].load_max_context()
            self._sized.add(engine)
        return self.fronts[engine]

    def host_proxy(self, engine: int, sampling: SamplingConfig, loop: asyncio.AbstractEventLoop) -> HostProxy:
        """The in-process proxy recording calls to `engine` sampled as `sampling`, its calls run on `loop`
        (the worker's, where the engine fronts are used)."""
        key = (engine, sampling.model_dump_json())
        with self._lock:
            if key not in self._in_process:
                self._in_process[key] = InProcessProxy(
                    EngineChat(self._front(engine), self.served),
                    max_tokens=sampling.max_new_tokens,
                    sampling=proxy_sampling(sampling),
                )
            return HostProxy(self._in_process[key], loop)

    def for_placement(
        self,
        placement: Literal["host", "sandbox"],
        engine: int,
        sampling: SamplingConfig,
        loop: asyncio.AbstractEventLoop,
    ) -> HostProxy | str:
        """The proxy of an episode on `engine`: in this process for an agent on the host, the URL of the proxy
        server for an agent in the sandbox (blocking the first time: call from a thread)."""
        if placement == "host":
            return self.host_proxy(engine, sampling, loop)
        return self.proxy_url(engine, sampling)

    def proxy_url(self, engine: int, sampling: SamplingConfig) -> str:
        """The proxy server recording calls to `engine` sampled as `sampling` (started on first use)."""
        from rock.proxy import ProxyConfig
        from rock.proxy.app import create_app as create_proxy
        from roll.engine.server import create_app

        key = (engine, sampling.model_dump_json())
        with self._lock:
            if key not in self._proxies:
                if engine not in self._servers:
                    app = create_app(self._front(engine), self.served)
                    self._servers[engine] = LoopbackServer(app, f"engine-front-{engine}")
                config = ProxyConfig(
                    mode="train",
                    upstream_url=f"{self._servers[engine].url}/v1",
                    max_tokens=sampling.max_new_tokens,
                    temperature=sampling.temperature,
                    top_p=sampling.top_p,
                    top_k=sampling.top_k,
                    stop=sampling.stop,
                    # A call may take as long as its episode; one that timed out is not retried (the
                    # engine would start the same generation over).
                    timeout_s=self.max_call_s,
                    max_retries=0,
                )
                self._proxies[key] = LoopbackServer(create_proxy(config), f"model-proxy-{engine}")
            return self._proxies[key].url

    def close(self) -> None:
        for server in [*self._proxies.values(), *self._servers.values()]:
            server.close()
