"""Expert data from recorded episodes: the expert steps of a successful episode (to refresh the expert
trajectory with the policy's own success), and an imitation trajectory of expert chunks for the fallback
when no positive sample exists.

Expert chunks are rendered with the model's chat template; their output is the assistant turn as the model
would write it (content, then `<tool_call>{json}</tool_call>` blocks) and its end-of-turn token. They carry no
engine logprobs and `expert=True`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rock.proxy.types import EpisodeRecord
from roll.models.chat import chat_stop_token_ids, render_chat
from roll.models.tool_calls import TOOL_CALL_CLOSE, TOOL_CALL_OPEN
from roll.rollout.terminal.resampling.expert import ExpertStep, expert_from_messages
from roll.types import Chunk, Trajectory

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


def episode_messages(record: EpisodeRecord) -> list[dict[str, Any]]:
    """The whole conversation of a recorded episode: its last call's context and the answer to it."""
    if not record.chunks:
        raise ValueError(f"episode {record.episode_id} recorded no model call, so it has no conversation")
    last = record.chunks[-1]
    return [*last.messages, last.answer]


def expert_from_record(record: EpisodeRecord) -> list[ExpertStep]:
    """The steps of a recorded (successful) episode, to use as a task's expert trajectory."""
    return expert_from_messages(episode_messages(record))


def assistant_text(message: dict[str, Any]) -> str:
    """An assistant message as the model writes it in the text tool protocol."""
    parts = [message.get("content") or ""]
    for call in message.get("tool_calls") or []:
        function = call["function"]
        arguments = function.get("arguments") or "{}"
        parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
        parts.append(
            TOOL_CALL_OPEN + json.dumps({"name": function["name"], "arguments": parsed}) + TOOL_CALL_CLOSE
        )
    return "".join(parts)


def imitation_trajectory(
    messages: list[dict[str, Any]],
    tokenizer: PreTrainedTokenizerBase,
    tools: list[dict[str, Any]] | None = None,
    task_id: str = "",
    group_id: str = "",
) -> Trajectory:
    """One expert chunk per assistant message of `messages`, with reward 1 (a successful demonstration)."""
    end_of_turn = chat_stop_token_ids(tokenizer)[:1]
    chunks = []
    for index, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        context = render_chat(tokenizer, messages[:index], tools).token_ids
        output = tokenizer.encode(assistant_text(message), add_special_tokens=False) + end_of_turn
        chunks.append(Chunk(context_ids=context, output_ids=output, output_logprobs=None, expert=True))
    if not chunks:
        raise ValueError("the messages hold no assistant turn, so there is nothing to imitate")
    return Trajectory(
        chunks=chunks, reward=1.0, task_id=task_id, group_id=group_id, metadata={"imitation": True}
    )


def imitation_fallback(
    record: EpisodeRecord,
    expert: list[ExpertStep],
    start: int,
    tokenizer: PreTrainedTokenizerBase,
    task_id: str,
    group_id: str,
) -> Trajectory:
    """The imitation fallback of a failed episode that started after `expert[:start]`: the expert's steps up
    to and including its step at `start`, each conditioned on exactly the context the policy had (the
    messages of the episode's first model call, tool results of the replayed prefix included). Its chunks
    count at the version of that call, so the buffer's staleness bound applies to them as to the episode."""
    if not record.chunks:
        raise ValueError(f"episode {record.episode_id} recorded no model call to take the context from")
    if not 0 <= start < len(expert):
        raise ValueError(f"start {start} has no expert step to imitate (the expert has {len(expert)})")
    first = record.chunks[0]
    messages = [*first.messages, expert[start].assistant_message(f"expert_{start}")]
    trajectory = imitation_trajectory(messages, tokenizer, first.tools, task_id=task_id, group_id=group_id)
    version = first.chunk.weight_version
    chunks = [chunk.model_copy(update={"weight_version": version}) for chunk in trajectory.chunks]
    metadata = {"imitation": True, "success": True, "task": task_id, "start": start}
    return trajectory.model_copy(update={"chunks": chunks, "metadata": metadata})
