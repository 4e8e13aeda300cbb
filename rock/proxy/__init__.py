"""ModelProxyService: the agents' OpenAI-compatible model endpoint, recording every call.

Modes (`ProxyConfig.mode`):
- `train`: the same `iflow.context.prepare` the agent runs, then the engine server (`roll serve`) with
  `return_token_ids`; every call becomes a `Chunk` (`rock.proxy.types`) of its episode's trajectory.
- `deploy`: forwards to an upstream OpenAI-compatible API with its key, retrying 429/5xx, recording JSONL.
- `replay`: answers from such a recording, in order.

A request names its episode by route (`/episodes/{id}/v1/chat/completions`) or header (`X-Rock-Episode`), or
its sandbox (`X-Rock-Sandbox`, set by the proxy itself on a sandbox's unix socket, see `attach`).
"""

import importlib
from typing import Any

_EXPORTS = {
    "ProxyClient": "rock.proxy.client",
    "EpisodeRecord": "rock.proxy.types",
    "ProxyConfig": "rock.proxy.types",
    "RecordedChunk": "rock.proxy.types",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:  # loaded on first use, so `rock --help` does not import torch
    if name not in _EXPORTS:
        raise AttributeError(f"module 'rock.proxy' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
