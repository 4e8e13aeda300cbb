"""Prompt tokens per model call and per episode of iFlow's two prompt profiles, counted exactly.

The real agent (`iflow.agent.build`, the code the `iflow` CLI and the rollouts run) plays one scripted
terminal episode in a scratch folder: look at the folder, read a log, count its ERROR lines into a file, check
the file, report (5 model calls, the same replies for both profiles; only tools both profiles have). The
model is a scripted OpenAI-compatible server (`iflow.testing`), which records each request as sent. Each
request is then rendered with the engine server's own chat templating (`roll.models.chat.render_chat`, whose
token ids are what `roll serve` prefills and what the model proxy records as a chunk's context ids) and the
tokenizer of builtin:smollm2-135m-instruct.

"full" (today's default) is the baseline, "compact" the small-model profile; the script prints a table, the
ratio full/compact, and one JSON line.

    python benchmarks/iflow_prompt_tokens.py
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from iflow.agent import ApprovalMode
from iflow.agent.build import AgentOptions, build_agent, build_parts
from iflow.testing import ScriptedReply, call, say
from iflow.types import PromptProfile

INSTRUCTION = "Count the lines of app.log that contain ERROR and write the number to answer.txt."
LOG_LINES = [
    f"2026-11-30 10:{minute:02d} {'ERROR' if minute % 4 == 0 else 'INFO'} step {minute}"
    for minute in range(24)
]


def episode() -> list[ScriptedReply]:
    return [
        call("run_shell_command", command="ls -la"),
        call("read_file", file_path="app.log"),
        call("run_shell_command", command="grep -c ERROR app.log > answer.txt"),
        call("run_shell_command", command="cat answer.txt"),
        say("Counted the ERROR lines of app.log (6) and wrote the number to answer.txt."),
    ]


def recorded_requests(profile: PromptProfile) -> list[dict[str, Any]]:
    """The requests the agent sends in the scripted episode under `profile`."""
    from iflow.testing import ScriptedOpenAIServer

    with tempfile.TemporaryDirectory() as scratch, ScriptedOpenAIServer(episode()) as server:
        home, work = Path(scratch) / "home", Path(scratch) / "work"
        home.mkdir()
        work.mkdir()
        (work / "app.log").write_text("\n".join(LOG_LINES) + "\n")
        # No user or system settings file may change what is measured.
        os.environ["IFLOW_HOME"] = str(home)
        os.environ["IFLOW_SYSTEM_SETTINGS"] = str(home / "none.json")
        options = AgentOptions(
            cwd=work,
            base_url=server.url,
            model=server.model,
            approval_mode=ApprovalMode.YOLO,
            prompt_profile=profile,
        )
        parts = build_parts(options)
        try:
            agent = build_agent(parts)
            result = agent.run(INSTRUCTION)
            agent.close()
        finally:
            parts.close()
        if result.termination.value != "completed" or (work / "answer.txt").read_text().strip() != "6":
            raise RuntimeError(f"the scripted episode did not complete under {profile}: {result}")
        return list(server.requests)


def prompt_tokens(tokenizer: Any, request: dict[str, Any]) -> int:
    from roll.models.chat import render_chat

    return len(render_chat(tokenizer, request["messages"], request.get("tools")).token_ids)


def measure(tokenizer: Any, profile: PromptProfile) -> dict[str, Any]:
    requests = recorded_requests(profile)
    per_call = [prompt_tokens(tokenizer, request) for request in requests]
    first = requests[0]
    instruction_only = [message for message in first["messages"] if message["role"] != "system"]
    return {
        "profile": profile,
        "calls": len(per_call),
        "tools": len(first.get("tools") or []),
        "first_call": per_call[0],
        "system_and_tools": per_call[0] - prompt_tokens(tokenizer, {"messages": instruction_only}),
        "mean_per_call": round(sum(per_call) / len(per_call), 1),
        "per_episode": sum(per_call),
        "per_call": per_call,
    }


def main() -> None:
    from rich.console import Console
    from rich.table import Table
    from transformers import AutoTokenizer

    from roll.models.registry import resolve_model_path

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path("builtin:smollm2-135m-instruct"))
    full, compact = measure(tokenizer, "full"), measure(tokenizer, "compact")
    table = Table(
        title="iFlow prompt tokens (SmolLM2 tokenizer, roll serve's templating), one 5-call episode"
    )
    for column in ("profile", "tools", "system+tools", "first call", "mean per call", "per episode"):
        table.add_column(column, justify="left" if column == "profile" else "right")
    for row in (full, compact):
        table.add_row(
            row["profile"],
            str(row["tools"]),
            str(row["system_and_tools"]),
            str(row["first_call"]),
            str(row["mean_per_call"]),
            str(row["per_episode"]),
        )
    console = Console()
    console.print(table)
    ratio = full["per_episode"] / compact["per_episode"]
    console.print(f"full / compact per episode: {ratio:.2f}x")
    print(json.dumps({"benchmark": "iflow_prompt_tokens", "full": full, "compact": compact, "ratio": ratio}))


if __name__ == "__main__":
    main()
