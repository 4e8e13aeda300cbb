"""The embedded torch inference engine: continuous batching over a transformers causal LM (CPU or one GPU).

How a request flows (one worker thread does all model work; the asyncio side only routes commands and tokens):

- `engine.py`: `TorchEngine` takes requests, hands commands to the core between steps, streams tokens back.
- `core.py`: each step applies commands (new requests, aborts, weight updates, sleep/wake: the weights copied
  in place, or offloaded and brought back), prefills up to `prefill_chunk_tokens` prompt tokens (a long
  prompt is split over steps, so running decodes never wait for it), admits finished prefills to the running
  batch, then runs one decode step for every running completion.
  A prompt's last token is fed by the decode step, so prefill needs no logits at all.
- `kv_cache.py`: the running batch's KV cache: the prompt prefix all running rows share (a system prompt and
  tool schemas), stored once, then left-padded rows in preallocated buffers with a per-row mask and per-row
  position ids; rows join and leave at any step.
- `attention.py`: decode attention that reads the shared prefix once for all rows (one matrix product), not
  once per row.
- `packed_linear.py`: on CPU the engine's passes run the model's linear layers through oneDNN with weights
  packed once (MKL's sgemm is 2-4x slower at a decode step's few rows).
- `prefix_cache.py`: KV of recent prompts and finished conversations, reused by prompts that start alike.
- `sampling.py`: greedy/temperature/top-k/top-p with one seeded generator per completion; reported logprobs
  are the raw model distribution's.
- `detokenize.py`: incremental detokenization and stop strings.
"""

from roll.engine.torch_engine.config import TorchEngineConfig
from roll.engine.torch_engine.engine import TorchEngine

__all__ = ["TorchEngine", "TorchEngineConfig"]
