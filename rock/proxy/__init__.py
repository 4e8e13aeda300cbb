"""ModelProxyService: the agents' OpenAI-compatible model endpoint, recording every call.

Modes (`ProxyConfig.mode`):
- `train`: the same `iflow.context.prepare` the agent runs, then the engine server (`roll serve`) with
  `return_token_ids`; every call becomes a `roll.types.Chunk` of its episode's trajectory.
- `deploy`: forwards to an upstream OpenAI-compatible API with its key, retrying 429/5xx, recording JSONL.
- `replay`: answers from such a recording, in order.

A request names its episode by route (`/episodes/{id}/v1/chat/completions`) or header (`X-Rock-Episode`), or
its sandbox (`X-Rock-Sandbox`, set by the proxy itself on a sandbox's unix socket, see `attach`).
"""

from rock.proxy.client import ProxyClient
from rock.proxy.types import EpisodeRecord, ProxyConfig, RecordedChunk

__all__ = ["EpisodeRecord", "ProxyClient", "ProxyConfig", "RecordedChunk"]
