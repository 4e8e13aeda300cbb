"""A model of ours served for the length of a bench run: `roll serve` on a loopback port, in its own process.

`rome-bench terminal-pro --agent iflow --model builtin:smollm2-135m-instruct` (or a model folder) needs an
OpenAI-compatible endpoint; instead of asking the user to start one, the run starts `roll serve` exactly as a
user would, waits until it answers, gives iFlow its URL (the served model's name is the id it was given), and
stops it when the run ends. Its output goes to a log file in the run folder.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

BUILTIN_PREFIX = "builtin:"
START_TIMEOUT_S = 600.0  # the first use of a builtin model converts it (about a minute on 2 busy cores)
POLL_S = 0.5
STOP_TIMEOUT_S = 30.0
LOG_TAIL_CHARS = 2000


class ModelServerError(RuntimeError):
    """The model could not be served; the message says why and what to do."""


def serves_locally(model: str) -> bool:
    """Whether `model` names weights of ours (a builtin id or a model folder) rather than an endpoint."""
    return model.startswith(BUILTIN_PREFIX) or (Path(model).expanduser() / "config.json").is_file()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _tail(log: Path) -> str:
    text = log.read_text(errors="replace") if log.is_file() else ""
    return text[-LOG_TAIL_CHARS:].strip() or "(no output)"


@contextlib.contextmanager
def served_model(model: str, log: Path, start_timeout_s: float = START_TIMEOUT_S) -> Iterator[str]:
    """Serve `model` with `roll serve` on 127.0.0.1 until the block ends; yields its base URL (`.../v1`)."""
    port = _free_port()
    command = [sys.executable, "-m", "roll.cli", "serve", "--model", model, "--port", str(port)]
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as output:
        server = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + start_timeout_s
        while not _answers(base):
            if server.poll() is not None:
                raise ModelServerError(
                    f"`roll serve --model {model}` exited with status {server.returncode} before it served; "
                    f"its output ({log}):\n{_tail(log)}"
                )
            if time.monotonic() > deadline:
                raise ModelServerError(
                    f"`roll serve --model {model}` did not answer within {start_timeout_s:g} s; its output "
                    f"({log}):\n{_tail(log)}"
                )
            time.sleep(POLL_S)
        yield f"{base}/v1"
    finally:
        _stop(server)


def _answers(base: str) -> bool:
    try:
        return httpx.get(f"{base}/health", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def _stop(server: subprocess.Popen[bytes]) -> None:
    """SIGTERM (uvicorn shuts down gracefully), then SIGKILL to the whole process group if it lingers."""
    if server.poll() is None:
        server.terminate()
        try:
            server.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, 9)
            server.wait()
