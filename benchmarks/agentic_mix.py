"""The request mix of the engine throughput benchmark: what an agentic RL rollout sends to the engine.

The requests are real iFlow requests, rendered the way `roll serve` renders a /v1/chat/completions call:
iFlow's own system prompt and the JSON schemas of its twelve tools (about 2,000 tokens that every request of
the agent carries), then the episode so far. A rollout runs groups of episodes on the same task (GRPO-style
groups of 4 rollouts per task); the 16 concurrent requests are 4 tasks x 4 rollouts, each rollout at its own
turn (0 to 4 tool calls done), with its own tool calls and tool results (directory listings, file reads, test
output, search hits, edits). Output lengths are mixed: 32 to 256 tokens (a bare tool call, or reasoning and a
tool call).

So requests share the system prompt and tools (all 16) and the task (within a group); the histories differ.
Every contender gets exactly these token ids.
"""

from __future__ import annotations

import json
import random
from typing import Any

from iflow.agent.approval import ApprovalMode
from iflow.agent.prompts import main_system_prompt
from iflow.tools import all_tools
from roll.models import LoadedModel, render_chat

TASKS = [
    "The test tests/test_parser.py::test_nested_lists fails with IndexError. Find the cause and fix it.",
    "Add a --verbose flag to the CLI in app/cli.py that prints each file as it is processed.",
    "Rename the function load_cfg to load_config everywhere in the project and keep the tests passing.",
    "The server in app/server.py returns 500 on an empty request body; make it return 400 with a message.",
]

FILES = ["app/__init__.py", "app/cli.py", "app/parser.py", "app/server.py", "app/config.py", "app/utils.py"]

CODE_LINES = [
    "def parse(tokens):",
    "    stack = []",
    "    for token in tokens:",
    "        if token == '(':",
    "            stack.append([])",
    "        elif token == ')':",
    "            done = stack.pop()",
    "            if not stack:",
    "                return done",
    "            stack[-1].append(done)",
    "        else:",
    "            stack[-1].append(atom(token))",
    "    raise SyntaxError('unbalanced parentheses')",
    "",
    "def atom(token):",
    "    try:",
    "        return int(token)",
    "    except ValueError:",
    "        return token",
    "",
]


def _listing(rng: random.Random) -> str:
    names = ["README.md", "pyproject.toml", "app/", "tests/", "docs/", ".gitignore", "Makefile", "setup.cfg"]
    return "\n".join(rng.sample(names, rng.randint(5, len(names))))


def _file_read(rng: random.Random, path: str) -> str:
    count = rng.randint(20, 60)
    lines = [CODE_LINES[i % len(CODE_LINES)] for i in range(count)]
    return f"[{path}: lines 1-{count} of {count + rng.randint(0, 80)}]\n" + "\n".join(
        f"{i + 1:>4}  {line}" for i, line in enumerate(lines)
    )


def _pytest_output(rng: random.Random) -> str:
    passed = rng.randint(3, 12)
    return (
        "exit code 1\n"
        + "." * passed
        + "F\n=================================== FAILURES ===================================\n"
        "_____________________________ test_nested_lists ______________________________\n"
        "    def test_nested_lists():\n>       assert parse(['(', '(', '1', ')', ')']) == [[1]]\n"
        "app/parser.py:12: in parse\n    stack[-1].append(atom(token))\n"
        "E   IndexError: list index out of range\n"
        f"FAILED tests/test_parser.py::test_nested_lists - IndexError\n1 failed, {passed} passed in 0.21s"
    )


def _search_hits(rng: random.Random, pattern: str) -> str:
    hits = rng.sample(FILES, rng.randint(2, 5))
    return "\n".join(f"{path}:{rng.randint(1, 90)}:    result = {pattern}(path)" for path in hits)


def _step(rng: random.Random) -> tuple[str, str, dict[str, Any], str]:
    """One turn of an episode: (the assistant's words, tool name, arguments, tool result)."""
    kind = rng.choice(["list", "read", "test", "search", "edit"])
    if kind == "list":
        where = rng.choice([".", "app", "tests"])
        return "Let me look at the project layout first.", "list_directory", {"path": where}, _listing(rng)
    if kind == "read":
        path = rng.choice(FILES)
        thought = f"I will read {path} before changing anything."
        return thought, "read_file", {"file_path": path}, _file_read(rng, path)
    if kind == "test":
        command = "python -m pytest -x -q " + rng.choice(["tests/", "tests/test_parser.py"])
        return (
            "Running the tests to see the failure.",
            "run_shell_command",
            {"command": command},
            _pytest_output(rng),
        )
    if kind == "search":
        pattern = rng.choice(["load_cfg", "parse", "main"])
        arguments = {"pattern": pattern, "path": "."}
        return (
            "Searching for the places that use it.",
            "search_file_content",
            arguments,
            _search_hits(rng, pattern),
        )
    path = rng.choice(FILES)
    arguments = {"file_path": path, "old_string": "stack[-1].append", "new_string": "stack[-1].extend"}
    return "Now I make the edit.", "replace", arguments, f"Replaced 1 occurrence in {path}"


def _episode(rng: random.Random, task: str, turns: int, system: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": task},
    ]
    for turn in range(turns):
        thought, name, arguments, result = _step(rng)
        call_id = f"call_{turn}"
        messages.append(
            {
                "role": "assistant",
                "content": thought,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(arguments)},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
    return messages


def agentic_mix(
    loaded: LoadedModel, count: int, max_output: int, seed: int = 0
) -> list[tuple[list[int], int]]:
    """(prompt token ids, output length) per request; seeded, so every run sees the same mix."""
    rng = random.Random(seed)
    system = main_system_prompt(ApprovalMode.DEFAULT, memory="")
    tools = [tool.schema() for tool in all_tools()]
    outputs = [n for n in (32, 64, 96, 128, 192, 256) if n <= max_output]
    mix = []
    for index in range(count):
        task = TASKS[(index // 4) % len(TASKS)]
        messages = _episode(rng, task, turns=rng.randint(0, 4), system=system)
        prompt = render_chat(loaded.tokenizer, messages, tools=tools)
        mix.append((prompt.token_ids, rng.choice(outputs)))
    return mix
