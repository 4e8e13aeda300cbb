"""OpenAI-compatible HTTP server over any `InferenceEngine` (`roll serve`).

`create_app(engine, loaded)` serves `/v1/models`, `/v1/chat/completions`, `/v1/completions`, `/health` and
`/metrics` (Prometheus); the app starts and shuts down the engine with its lifespan.

Extension: a request with `"return_token_ids": true` (openai client: `extra_body={"return_token_ids": True}`)
also gets the exact tokens, so nothing is re-tokenized between rollout and training:
- chat: top-level `prompt_token_ids` and `weight_version`; per choice `token_ids` and `token_logprobs`
  (the engine's logprob of each sampled token). Streaming: `prompt_token_ids` on the first chunk, `token_ids`
  and `token_logprobs` on every choice delta, `weight_version` on a choice's last delta.
- completions: per choice `prompt_token_ids`, `token_ids`, `token_logprobs` and `weight_version`.
`top_k` is accepted as an extension sampling field as well.
"""

from roll.engine.server.app import create_app

__all__ = ["create_app"]
