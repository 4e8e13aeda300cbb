"""SFT data: OpenAI-style conversations (JSONL) to trajectories, one chunk per assistant turn.

Each assistant message may carry `error` (its tool call failed) and `relevant` (task-aware mask) flags; both
travel to the chunk and the error-masked loss drops such turns. The context of turn i is the model's own
chat template rendering of the messages before it (with the tools); the output is the assistant turn as the
model would generate it, up to and including its end-of-turn token.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from roll.models.chat import END_OF_TURN_TOKENS, render_chat
from roll.types import Chunk, Trajectory

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

FLAGS = ("error", "relevant")


class SFTDataError(ValueError):
    """A JSONL line that is not a usable conversation; the message names the file and line."""


class SFTExample(BaseModel):
    model_config = ConfigDict(extra="allow")

    messages: list[dict[str, Any]] = Field(min_length=2)
    tools: list[dict[str, Any]] | None = None


def read_examples(path: Path) -> list[SFTExample]:
    if not path.is_file():
        raise SFTDataError(f"SFT data file {path} does not exist; set data.path to a JSONL file")
    examples = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            example = SFTExample.model_validate(json.loads(line))
        except (json.JSONDecodeError, ValidationError) as error:
            raise SFTDataError(
                f"{path}:{number}: expected a JSON object with 'messages' (at least 2) and optional "
                f"'tools': {error}"
            ) from error
        if not any(m.get("role") == "assistant" for m in example.messages):
            raise SFTDataError(f"{path}:{number}: the conversation has no assistant message to learn from")
        examples.append(example)
    if not examples:
        raise SFTDataError(f"{path} holds no conversations")
    return examples


def _without_flags(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in m.items() if k not in FLAGS} for m in messages]


def _assistant_text(before: str, after: str, where: str) -> str:
    """The assistant turn: what rendering one more message adds, cut after its end-of-turn token."""
    if not after.startswith(before):
        raise SFTDataError(
            f"{where}: the chat template renders earlier turns differently once this one is added; "
            "SFT needs a template whose rendering of a conversation prefix does not change"
        )
    tail = after[len(before) :]
    ends = [(tail.find(token), token) for token in END_OF_TURN_TOKENS if token in tail]
    if not ends:
        raise SFTDataError(f"{where}: the chat template ends the assistant turn with no end-of-turn token")
    index, token = min(ends)
    return tail[: index + len(token)]


def to_trajectory(example: SFTExample, tokenizer: PreTrainedTokenizerBase, where: str = "") -> Trajectory:
    """One chunk per assistant message, carrying its error/relevant flags."""
    messages = _without_flags(example.messages)
    chunks: list[Chunk] = []
    for index, message in enumerate(example.messages):
        if message.get("role") != "assistant":
            continue
        prompt = render_chat(tokenizer, messages[:index], example.tools)
        extended = render_chat(tokenizer, messages[: index + 1], example.tools)
        text = _assistant_text(prompt.text, extended.text, f"{where} message {index}")
        output = tokenizer(text, add_special_tokens=False).input_ids
        chunks.append(
            Chunk(
                context_ids=prompt.token_ids,
                output_ids=output,
                error=bool(message.get("error", False)),
                relevant=bool(message.get("relevant", True)),
            )
        )
    return Trajectory(chunks=chunks, reward=0.0, metadata={"source": where})


def load_trajectories(path: Path, tokenizer: PreTrainedTokenizerBase) -> list[Trajectory]:
    return [
        to_trajectory(example, tokenizer, where=f"{path}:{number}")
        for number, example in enumerate(read_examples(path), start=1)
    ]
