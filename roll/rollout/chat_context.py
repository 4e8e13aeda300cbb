"""A chat's token ids, grown turn by turn with exactly the tokens the engine generated.

The next LLM call's context is the previous context, the generated ids (ended with the template's
end-of-turn token if generation stopped without one), and the template's tokens for the new observation.
So every chunk's context extends the previous chunk's context plus output, the trainer packs a whole
episode into one sequence, and generated text is never re-tokenized.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from roll.models.chat import END_OF_TURN_TOKENS, render_chat

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


class ChatContext:
    def __init__(self, tokenizer: PreTrainedTokenizerBase, messages: list[dict[str, Any]]) -> None:
        self.tokenizer = tokenizer
        self.messages = list(messages)
        self.token_ids: list[int] = render_chat(tokenizer, self.messages).token_ids
        vocab = tokenizer.get_vocab()
        self._end_ids = {token: vocab[token] for token in END_OF_TURN_TOKENS if token in vocab}

    def add_turn(self, output_ids: list[int], text: str, observation: str) -> None:
        """Append the assistant's generated turn and the user's next message (the env's observation)."""
        assistant = {"role": "assistant", "content": text}
        user = {"role": "user", "content": observation}
        closed = str(
            self.tokenizer.apply_chat_template(
                [*self.messages, assistant], add_generation_prompt=False, tokenize=False
            )
        )
        prompt = render_chat(self.tokenizer, [*self.messages, assistant, user]).text
        self.messages += [assistant, user]
        ends = [(closed.rfind(token), token) for token in self._end_ids if token in closed]
        if not prompt.startswith(closed) or not ends:
            # A template that rewrites earlier turns: the context can only be rendered afresh.
            self.token_ids = self.tokenizer(prompt, add_special_tokens=False).input_ids
            return
        position, end_token = max(ends)
        tail = closed[position + len(end_token) :] + prompt[len(closed) :]
        turn = list(output_ids)
        if not turn or turn[-1] not in self._end_ids.values():
            turn.append(self._end_ids[end_token])
        self.token_ids = self.token_ids + turn + self.tokenizer(tail, add_special_tokens=False).input_ids
