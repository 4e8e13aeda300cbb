"""The scripted engine of `engines.engine.type: scripted`: a test double of the model's choices that follows
each terminal task's oracle expert (see ScriptedEngineConfig).

Which task a call belongs to is read from its prompt (the task's instruction), and how far the episode got
from the assistant turns the prompt already holds (the replayed expert prefix counts): the reply is the next
oracle step. Nothing else is scripted: the agent, proxy, sandbox and tests are the real ones.
"""

from __future__ import annotations

import asyncio
import json
import random
from typing import TYPE_CHECKING

from roll.engine.protocol import EngineError
from roll.engine.types import GenerateRequest, GenerateResult
from roll.rollout.terminal.resampling.expert import FINAL_MESSAGE, SHELL_TOOL, ExpertStep, oracle_expert
from roll.rollout.terminal.scripted_config import ScriptedEngineConfig
from roll.testing import ScriptedEngine

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

ASSISTANT_TURN = "<|im_start|>assistant"


def reply_text(step: ExpertStep) -> str:
    """An expert step as the model writes it: a `<tool_call>` block (the chat template's form) or text."""
    if step.command is None:
        return step.content or FINAL_MESSAGE
    call = {"name": SHELL_TOOL, "arguments": {"command": step.command}}
    return step.content + "<tool_call>" + json.dumps(call) + "</tool_call>"


class OracleFollower(ScriptedEngine):
    """Answers every call with the next oracle step of the task whose instruction the prompt holds."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, config: ScriptedEngineConfig) -> None:
        from rome.terminal_tasks.task import load_tasks

        super().__init__(tokenizer)
        self.experts: dict[str, list[ExpertStep]] = {
            task.instruction.strip(): oracle_expert(task)
            for task in load_tasks(config.tasks_dir).tasks
            if task.solution_command is not None and task.solution_files
        }
        if not self.experts:
            raise ValueError(f"no task with a solution script under {config.tasks_dir}: set tasks_dir")
        self.config = config
        self._random = random.Random(config.seed)

    @classmethod
    def for_model(cls, model: str, config: ScriptedEngineConfig) -> OracleFollower:
        """The follower speaking `model`'s tokenizer (its weights are never loaded)."""
        from transformers import AutoTokenizer

        from roll.models import resolve_model_path

        return cls(AutoTokenizer.from_pretrained(str(resolve_model_path(model))), config)

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        if self.config.latency_s:
            await asyncio.sleep(self.config.latency_s)
        return await super().generate(request)

    def _reply(self, request: GenerateRequest) -> str:
        prompt = self.tokenizer.decode(request.prompt_token_ids)
        with self._lock:
            self.prompts.append(list(request.prompt_token_ids))
            erred = request.params.temperature > 0 and self._random.random() < self.config.mistake_rate
        expert = next((steps for text, steps in self.experts.items() if text in prompt), None)
        if expert is None:
            raise EngineError("the scripted engine found no known task instruction in the prompt")
        done = prompt.count(ASSISTANT_TURN) - 1
        if erred or done >= len(expert):
            return FINAL_MESSAGE
        return reply_text(expert[done])
