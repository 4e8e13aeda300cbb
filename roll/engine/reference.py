"""What plain transformers computes for the same model: the yardstick for the engine's tests and benchmark."""

from __future__ import annotations

import torch
from transformers.generation.streamers import BaseStreamer

from roll.models import LoadedModel


def eos_token_ids(loaded: LoadedModel) -> list[int]:
    """The tokens that end a completion: the generation config's eos plus the tokenizer's, as the engine."""
    ids = {loaded.tokenizer.eos_token_id}
    configured = loaded.model.generation_config.eos_token_id
    ids.update([configured] if isinstance(configured, int) else configured or [])
    return sorted(i for i in ids if i is not None)


def greedy_generate(
    loaded: LoadedModel, prompt: list[int], max_new_tokens: int, ignore_eos: bool = False
) -> list[int]:
    """transformers' own greedy `generate` of one prompt (no padding involved)."""
    return batched_generate(loaded, [prompt], max_new_tokens, ignore_eos)[0]


def batched_generate(
    loaded: LoadedModel,
    prompts: list[list[int]],
    max_new_tokens: int,
    ignore_eos: bool = False,
    streamer: BaseStreamer | None = None,
) -> list[list[int]]:
    """transformers' greedy `generate` of several prompts as one left-padded batch.

    Completions end at eos, or with `ignore_eos` run to `max_new_tokens` with eos an ordinary token (as in the
    engine; `min_new_tokens` would instead forbid eos and change the tokens).
    """
    eos = eos_token_ids(loaded)
    width = max(len(p) for p in prompts)
    pad = eos[0]
    device = loaded.model.device
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
    with torch.inference_mode():
        out = loaded.model.generate(
            ids,
            attention_mask=mask,
            max_new_tokens=max_new_tokens,
            do_sample=False,
            # An id past the vocabulary: generate replaces an unset eos with the model's; this never comes.
            eos_token_id=[loaded.model.config.get_text_config().vocab_size] if ignore_eos else eos,
            pad_token_id=pad,
            streamer=streamer,
        )
    completions = []
    for row in out[:, width:].tolist():
        end = len(row) if ignore_eos else next((i + 1 for i, t in enumerate(row) if t in eos), len(row))
        completions.append(row[:end])
    return completions


def forward_logprobs(loaded: LoadedModel, prompt: list[int], completion: list[int]) -> torch.Tensor:
    """Log-probabilities [len(completion), vocab] of one plain forward pass over prompt + completion."""
    ids = torch.tensor([[*prompt, *completion]], device=loaded.model.device)
    with torch.inference_mode():
        logits = loaded.model(input_ids=ids).logits[0].float()
    return torch.log_softmax(logits, dim=-1)[len(prompt) - 1 : -1].cpu()
