"""The oracle teacher: an OpenAI-compatible chat endpoint whose replies replay a task's oracle.

The real iFlow agent talks to it (through the model proxy, like to any model) and runs its tool calls in the
task's sandbox, so the recorded history is exactly what iFlow produces: its system prompt, its tool schemas,
its tool-call and tool-result messages. Reply k of an episode is the plan's turn k: a `run_shell_command`
call per oracle step (a family's `solution/steps.json`, else each statement of `solution/solve.sh`), then the
final message. With `mistake_rate`, an attempt may first make one of the family's plausible mistakes (a
command that fails and changes nothing) and then go on; the reply after a failed call says so.
"""

from __future__ import annotations

import json
import random
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from iflow.types import EXIT_CODE_PATTERN, PromptProfile, tool_result_failed
from rock.proxy.sse import completion_events
from rome.data.types import SHELL_TOOL

START_TIMEOUT_S = 30.0
FINAL_MESSAGE = "The task is done."


@dataclass(frozen=True)
class Turn:
    command: str | None  # None: the final answer
    text: str
    mistake: bool = False


class PlanError(ValueError):
    """A task with no oracle the teacher can replay."""


def oracle_turns(task_dir: Path) -> tuple[list[Turn], list[tuple[int, Turn]], str]:
    """The oracle's steps, its mistakes (index of the step each comes before) and its final message."""
    steps_file = task_dir / "solution" / "steps.json"
    if steps_file.is_file():
        spec = json.loads(steps_file.read_text())
        steps = [Turn(s["command"], s["description"]) for s in spec["steps"]]
        mistakes = [
            (m["before"], Turn(m["command"], m["description"], True)) for m in spec.get("mistakes", [])
        ]
        return steps, mistakes, spec.get("final_message") or FINAL_MESSAGE
    from roll.rollout.terminal.resampling.expert import split_statements

    for name in ("solve.sh", "solution.sh"):
        script = task_dir / "solution" / name
        if script.is_file():
            commands = split_statements(script.read_text())
            if commands:
                return [Turn(c, "run the next step of the solution") for c in commands], [], FINAL_MESSAGE
    raise PlanError(
        f"{task_dir} has neither solution/steps.json nor a solution script the teacher can replay"
    )


def plan(task_dir: Path, attempt: int, mistake_rate: float) -> list[Turn]:
    """The turns of one attempt: deterministic in (task, attempt)."""
    steps, mistakes, final = oracle_turns(task_dir)
    turns = list(steps)
    rng = random.Random(f"{task_dir.name}/{attempt}")
    if mistakes and rng.random() < mistake_rate:
        before, mistake = rng.choice(mistakes)
        turns.insert(before, mistake)
    return [*turns, Turn(None, final)]


def _said(turn: Turn, previous_result: str | None) -> str:
    text = turn.text[:1].upper() + turn.text[1:]
    if previous_result is not None and tool_result_failed(previous_result):
        codes = EXIT_CODE_PATTERN.findall(previous_result)
        why = f"exit code {codes[-1]}" if codes else "an error"
        return f"That failed ({why}). {text}." if turn.command else text
    return f"{text}." if turn.command else text


def reply(
    turns: list[Turn], messages: list[dict[str, Any]], profile: PromptProfile = "full"
) -> dict[str, Any]:
    """The `chat.completion` answering `messages` (turn k after k assistant messages). Under the compact
    profile the shell call carries only `command`: the schema the model is shown has no `description`."""
    done = sum(1 for m in messages if m.get("role") == "assistant")
    turn = turns[min(done, len(turns) - 1)]
    previous = None  # the result of the last call (iFlow may add reminders after it)
    for message in reversed(messages):
        if message.get("role") == "assistant":
            break
        if message.get("role") == "tool":
            previous = message.get("content")
            break
    message: dict[str, Any] = {"role": "assistant", "content": _said(turn, previous)}
    finish = "stop"
    if turn.command is not None:
        shown = {"command": turn.command}
        if profile == "full":
            shown["description"] = turn.text
        arguments = json.dumps(shown, ensure_ascii=False)
        message["tool_calls"] = [
            {
                "id": f"call_{done}",
                "type": "function",
                "function": {"name": SHELL_TOOL, "arguments": arguments},
            }
        ]
        finish = "tool_calls"
    return {
        "id": f"chatcmpl-teacher-{done}",
        "object": "chat.completion",
        "created": 0,
        "model": "oracle-teacher",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


class TeacherServer:
    """`with TeacherServer() as teacher:` serves registered plans at `teacher.url` (ending in /v1); each
    request's `model` names its plan (`teacher.register(name, turns)`)."""

    def __init__(self) -> None:
        import uvicorn

        self.plans: dict[str, tuple[list[Turn], PromptProfile]] = {}
        self._lock = threading.Lock()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/v1"
        self._server = uvicorn.Server(uvicorn.Config(self._app(), log_level="warning"))
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True, name="oracle-teacher"
        )

    def register(self, name: str, turns: list[Turn], profile: PromptProfile = "full") -> None:
        with self._lock:
            self.plans[name] = (turns, profile)

    def _app(self) -> FastAPI:
        app = FastAPI(title="oracle teacher")

        @app.get("/v1/models")
        async def models() -> dict[str, Any]:
            return {"object": "list", "data": [{"id": "oracle-teacher", "object": "model"}]}

        @app.post("/v1/chat/completions", response_model=None)
        async def chat(request: Request) -> Any:
            body = await request.json()
            registered = self.plans.get(str(body.get("model")))
            if registered is None:
                message = f"no teacher plan named {body.get('model')!r}; register the task's plan first"
                return JSONResponse(
                    {"error": {"message": message, "type": "invalid_request"}}, status_code=404
                )
            turns, profile = registered
            answer = reply(turns, body.get("messages") or [], profile)
            if body.get("stream"):
                return StreamingResponse(completion_events(answer), media_type="text/event-stream")
            return JSONResponse(answer)

        return app

    def __enter__(self) -> TeacherServer:
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the oracle teacher on {self.url} did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=20)
        self._sock.close()
