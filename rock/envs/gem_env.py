"""A GEM environment running inside its own sandbox, isolated from the host.

The sandbox is built from the GEM image (`gem_image.py`); `gem_server.py` is copied in and serves the
environment on a unix socket inside the sandbox; every call is relayed by a one-shot `python3` in the
sandbox, so this works wherever the sandbox runs (only the admin's API is needed).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from rock.envs.gem_image import gem_build_context
from rock.sdk import RockError, Sandbox
from rock.sdk.env_errors import EnvError, UnknownEnvId

SERVER_PATH = "/tmp/rock_gem_server.py"
SOCKET_PATH = "/tmp/rock-gem.sock"
LOG_PATH = "/tmp/rock-gem.log"
# Each request goes to the relay's stdin from this file: as an argument it would hit the kernel's 128 KiB
# limit on one argv string ("Argument list too long") for a long action. One request at a time per env.
REQUEST_PATH = "/tmp/rock-gem-request.json"
START_TIMEOUT_S = 60.0
CALL_TIMEOUT_S = 120.0
RELAY = r"""
import socket, sys, time
deadline = time.time() + float(sys.argv[2])
while True:
    try:
        s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); break
    except OSError:
        if time.time() > deadline:
            raise SystemExit("the GEM server did not start: " + open(sys.argv[3]).read()[-2000:])
        time.sleep(0.05)
s.sendall(sys.stdin.buffer.read() + b"\n"); f = s.makefile("rb"); sys.stdout.write(f.readline().decode())
"""


def registered_gem_ids() -> list[str]:
    from gem.envs.registration import ENV_REGISTRY

    return sorted(ENV_REGISTRY)


class GemSandboxEnv:
    """`make` starts the sandbox and the environment; `reset`/`step` return GEM's tuples as dicts."""

    def __init__(self, env_id: str, kwargs: dict[str, Any], admin_url: str | None, **sandbox: Any) -> None:
        if env_id not in registered_gem_ids():
            raise UnknownEnvId(
                f"{env_id!r} is not a registered GEM environment; GET /envs lists them "
                "(a terminal task is played where it is made, with rome.terminal_tasks.env.TerminalTaskEnv)"
            )
        self.env_id = env_id
        options = {"cpus": 1.0, "memory": "1g"} | sandbox
        try:
            self.sandbox = Sandbox(build_context=str(gem_build_context()), admin_url=admin_url, **options)
        except RockError as error:
            raise EnvError(f"could not start the sandbox of {env_id}: {error}") from error
        try:
            self.sandbox.write_file(SERVER_PATH, (Path(__file__).parent / "gem_server.py").read_bytes())
            start = f"setsid python3 {SERVER_PATH} {SOCKET_PATH} >{LOG_PATH} 2>&1 </dev/null &"
            self.sandbox.exec(["sh", "-c", start], timeout=30)
            self._call({"op": "make", "env_id": env_id, "kwargs": kwargs}, wait=START_TIMEOUT_S)
        except BaseException:
            self.close()
            raise

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        return self._call({"op": "reset", "seed": seed})

    def step(self, action: Any) -> dict[str, Any]:
        return self._call({"op": "step", "action": action})

    def close(self) -> None:
        with contextlib.suppress(RockError):
            self.sandbox.close()

    def _call(self, request: dict[str, Any], wait: float = 5.0) -> dict[str, Any]:
        command = ["sh", "-c", f'python3 -c "$1" "$2" "$3" "$4" <{REQUEST_PATH}', "relay"]
        command += [RELAY, SOCKET_PATH, str(wait), LOG_PATH]
        try:
            self.sandbox.write_file(REQUEST_PATH, json.dumps(request))
            observation = self.sandbox.exec(command, timeout=CALL_TIMEOUT_S + wait)
        except RockError as error:
            raise EnvError(f"{self.env_id}: the sandbox failed during {request['op']}: {error}") from error
        if observation.exit_code != 0:
            raise EnvError(
                f"{self.env_id}: {request['op']} failed in the sandbox: {observation.output[-2000:]}"
            )
        answer = json.loads(observation.output)
        if not answer["ok"]:
            raise EnvError(f"{self.env_id}: {request['op']} raised in the environment: {answer['error']}")
        return answer["result"]
