"""Test double for a model's choices: the oracle teacher's plans as the policy of ROLL's `ScriptedEngine`.

Served by the real engine server (`roll.engine.server.loopback.serve_on_loopback`) with a real tokenizer, the
replies go through the chat template, the tool-call parser and `return_token_ids`, so an iFlow episode
against it records token ids like one against a real model of ours; only what the model says is scripted.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from rome.data.teacher import plan
from rome.data.types import SHELL_TOOL

ASSISTANT_TURN = "<|im_start|>assistant"  # ChatML, the template of the builtin models


def teacher_policy(tasks: Path) -> Callable[[str], str]:
    """A policy answering each prompt with the next turn of its task's plan (found by its instruction)."""
    plans = {}
    for folder in sorted(p for p in tasks.iterdir() if (p / "instruction.md").is_file()):
        plans[(folder / "instruction.md").read_text().strip()[:80]] = plan(folder, 0, 0.0)

    def policy(prompt: str) -> str:
        turns = next(t for key, t in plans.items() if key in prompt)
        turn = turns[min(prompt.count(ASSISTANT_TURN) - 1, len(turns) - 1)]
        if turn.command is None:
            return turn.text
        call = {"name": SHELL_TOOL, "arguments": {"command": turn.command}}
        return f"{turn.text}.\n<tool_call>\n{json.dumps(call)}\n</tool_call>"

    return policy
