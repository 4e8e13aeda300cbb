"""Expert prefixes for initialized resampling, replayed by iflow itself.

The expert's first k steps (OpenAI assistant messages with shell calls) are run through iflow's own shell tool
in the agent's executor, so the sandbox holds their effects and each tool result reads exactly as the agent's
own would; the history (system prompt, instruction, expert steps and their results) is the agent's, and it
is asked to continue (`CONTINUE_PROMPT`).

This module imports only iflow and the standard library: the host-side agent calls `prefilled_history`, and
the in-sandbox agent runs this same file next to the uploaded agent bundle
(`python3 prefill.py SPEC.json`, see `main`), so both replay and continue through one piece of code.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from iflow.agent import ApprovalMode, TerminationReason
from iflow.agent.build import AgentOptions, AgentParts, build_agent, build_parts, system_prompt
from iflow.tools.base import ToolContext
from iflow.tools.shell import RunShellCommand

CONTINUE_PROMPT = "Continue the task from where the steps above left off."


def replay(parts: AgentParts, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each expert assistant message, then the result of each of its shell calls run in `parts.executor`."""
    shell = RunShellCommand()
    context = ToolContext(
        executor=parts.executor,
        todos=parts.todos,
        save_memory=lambda fact: "memory is off while replaying expert steps",
        shell_timeout_s=parts.config.shell_timeout_s,
    )
    messages: list[dict[str, Any]] = []
    for message in steps:
        messages.append(message)
        for call in message.get("tool_calls") or []:
            result = shell.run(json.loads(call["function"]["arguments"]), context)
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result.output})
    return messages


def prefilled_history(
    parts: AgentParts, instruction: str, steps: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The agent's history after the expert steps: system prompt, instruction, steps and their results."""
    return [
        {
            "role": "system",
            "content": system_prompt(parts.options.cwd, parts.config.approval_mode, parts.prompt_profile),
        },
        {"role": "user", "content": instruction},
        *replay(parts, steps),
    ]


def main(argv: list[str]) -> int:
    """In the sandbox: replay the spec's expert steps in the working directory, then let iflow continue.

    SPEC.json holds `base_url`, `model`, `max_turns`, `max_time_s`, `prompt_profile` (optional: else the
    settings'), `instruction` and `steps` (the expert's assistant messages). Exit codes as iflow's CLI: 0
    when the agent completed, 1 otherwise."""
    if len(argv) != 1:
        print("usage: python3 prefill.py SPEC.json", file=sys.stderr)
        return 2
    spec = json.loads(Path(argv[0]).read_text())
    options = AgentOptions(
        cwd=Path.cwd(),
        base_url=spec["base_url"],
        model=spec["model"],
        approval_mode=ApprovalMode.YOLO,
        max_turns=spec["max_turns"],
        max_time_s=spec["max_time_s"],
        prompt_profile=spec.get("prompt_profile"),
    )
    parts = build_parts(options)
    try:
        agent = build_agent(parts)
        agent.messages = prefilled_history(parts, spec["instruction"], spec["steps"])
        try:
            result = agent.run(CONTINUE_PROMPT)
        finally:
            agent.close()
    finally:
        parts.close()
    print(
        f"[iflow] start {len(spec['steps'])}: {result.termination.value}, {result.rounds} rounds",
        file=sys.stderr,
    )
    if result.error:
        print(f"iflow: {result.error}", file=sys.stderr)
    return 0 if result.termination is TerminationReason.COMPLETED else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
