"""What the agent of a rollout worker talks to: `roll serve`'s app over each engine front, and a
ModelProxyService (train mode) in front of it per sampling setting, each on a loopback port in a thread."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from roll.engine.server.loopback import LoopbackServer

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from roll.rollout.config import SamplingConfig
    from roll.rollout.engine_front import EngineFront


@dataclass(frozen=True)
class ServedTokenizer:
    """The model the front's server names (the weights live in the engine actors)."""

    model_id: str
    tokenizer: PreTrainedTokenizerBase


class AgentEndpoints:
    """Per engine: its front served on loopback; per engine and sampling setting: a train-mode proxy."""

    def __init__(self, fronts: list[EngineFront], served: ServedTokenizer, max_call_s: float) -> None:
        self.fronts, self.served, self.max_call_s = fronts, served, max_call_s
        self._servers: dict[int, LoopbackServer] = {}
        self._proxies: dict[tuple[int, str], LoopbackServer] = {}
        self._lock = threading.Lock()

    def proxy_url(self, engine: int, sampling: SamplingConfig) -> str:
        """The proxy recording calls to `engine` sampled as `sampling` (started on first use)."""
        from rock.proxy import ProxyConfig
        from rock.proxy.app import create_app as create_proxy
        from roll.engine.server import create_app

        key = (engine, sampling.model_dump_json())
        with self._lock:
            if key not in self._proxies:
                if engine not in self._servers:
                    self.fronts[engine].load_max_context()
                    app = create_app(self.fronts[engine], self.served)
                    self._servers[engine] = LoopbackServer(app, f"engine-front-{engine}")
                config = ProxyConfig(
                    mode="train",
                    upstream_url=f"{self._servers[engine].url}/v1",
                    max_tokens=sampling.max_new_tokens,
                    temperature=sampling.temperature,
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
