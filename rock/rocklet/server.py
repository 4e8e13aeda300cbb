"""The rocklet's HTTP server on a unix socket (standard library only: it must start fast anywhere).

Routes (JSON unless noted; errors are `{"error": {"type", "message"}}` with the status of the error class):
  GET    /health                      -> RockletHealth
  POST   /sessions                    RockletSessionRequest -> {"name"}
  POST   /sessions/<name>/run         RockletRunRequest -> Observation (opens the session on first use)
  DELETE /sessions/<name>             -> {"name"}
  POST   /exec                        RockletExecRequest -> Observation
  GET    /files?path=P                -> raw bytes
  PUT    /files?path=P[&mode=0o644]   raw bytes -> {"path"}
  PUT    /archive?dest=D              tar bytes -> {"dest"}
  GET    /archive?path=P              -> tar bytes
  POST   /forwarders                  ForwarderRequest -> {"port", "target_socket"}
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading

from rock.rocklet import files
from rock.rocklet.errors import BadRequest, RockletError, SessionExists, SessionNotFound
from rock.rocklet.forwarder import Forwarders
from rock.rocklet.oneshot import run_once
from rock.rocklet.output import DEFAULT_MAX_OUTPUT
from rock.rocklet.shell import ShellSession, find_shell
from rock.rocklet.wire import Body, HttpServer, Response, split_target

# Importing typing adds ~4 ms to every sandbox's start; only type checkers need it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

VERSION = "1"
DEFAULT_SOCKET = "/run/rock/rocklet.sock"
DEFAULT_SESSION = "default"


class Rocklet:
    """What the server can do, independent of HTTP."""

    def __init__(self, state_dir: str) -> None:
        self.state_dir = state_dir
        self.base_env = dict(os.environ)
        self.sessions: dict[str, ShellSession] = {}
        self.sessions_lock = threading.Lock()
        self.forwarders = Forwarders()
        self._opening: threading.Thread | None = None
        self._unused: set[str] = set()

    def open_default_session(self) -> None:
        """Open the default session in the background, so the sandbox's first `run` finds its shell ready
        instead of waiting for one to start. Until someone uses it, `create_session` may replace it."""

        def open_it() -> None:
            with contextlib.suppress(RockletError):  # no shell in this image: `run` says so when asked
                self.create_session(DEFAULT_SESSION, None, None)
                self._unused.add(DEFAULT_SESSION)

        self._opening = threading.Thread(target=open_it, name="default-session", daemon=True)
        self._opening.start()

    def _wait_for_default(self, name: str) -> None:
        opening = self._opening
        if name == DEFAULT_SESSION and opening is not None:
            opening.join()

    def create_session(self, name: str, env: dict[str, str] | None, cwd: str | None) -> ShellSession:
        if threading.current_thread() is not self._opening:
            self._wait_for_default(name)
        with self.sessions_lock:
            if name in self._unused:  # the default opened at boot, never used: this one takes its place
                self._unused.discard(name)
                self.sessions.pop(name).close()
            if name in self.sessions:
                raise SessionExists(f"session {name!r} is already open; close it first or use another name")
            session = ShellSession(name, {**self.base_env, **(env or {})}, cwd, self.state_dir)
            self.sessions[name] = session
            return session

    def session(self, name: str, create: bool) -> ShellSession:
        self._wait_for_default(name)
        self._unused.discard(name)
        with self.sessions_lock:
            found = self.sessions.get(name)
        if found is not None:
            return found
        if not create:
            raise SessionNotFound(f"no session named {name!r}; open sessions: {sorted(self.sessions)}")
        try:
            return self.create_session(name, None, None)
        except SessionExists:
            return self.sessions[name]

    def close_session(self, name: str) -> None:
        self._wait_for_default(name)
        self._unused.discard(name)
        with self.sessions_lock:
            session = self.sessions.pop(name, None)
        if session is None:
            raise SessionNotFound(f"no session named {name!r}; open sessions: {sorted(self.sessions)}")
        session.close()

    def health(self) -> dict[str, Any]:
        return {
            "status": "ok",
            "version": VERSION,
            "pid": os.getpid(),
            "python": sys.version.split()[0],
            "shell": find_shell(self.base_env),
            "sessions": sorted(self.sessions),
            "forwarders": {str(port): target for port, target in self.forwarders.targets.items()},
        }

    def shell_pids(self) -> list[int]:
        """The session shells' own pids: what survives when the sandbox's processes are culled."""
        with self.sessions_lock:
            return [s.proc.pid for s in self.sessions.values() if s.proc is not None]

    def shutdown(self) -> None:
        for name in list(self.sessions):
            self.sessions.pop(name).close()


def _field(body: dict[str, Any], name: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
    value = body.get(name, default)
    if value is ...:
        raise BadRequest(f"field {name!r} is required")
    if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
        raise BadRequest(f"field {name!r} has the wrong type {type(value).__name__}")
    return value


def _timeout(body: dict[str, Any]) -> float:
    timeout = float(_field(body, "timeout", (int, float)))
    if timeout <= 0:
        raise BadRequest(f"timeout must be positive seconds, got {timeout}")
    return timeout


def _max_output(body: dict[str, Any]) -> int:
    limit = _field(body, "max_output", int, DEFAULT_MAX_OUTPUT)
    if limit < 0:
        raise BadRequest(f"max_output must be >= 0 bytes, got {limit}")
    return limit


def _env(body: dict[str, Any]) -> dict[str, str] | None:
    env = _field(body, "env", dict, None)
    if env is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise BadRequest("field 'env' must map strings to strings")
    return env


MAX_JSON = 4 * 1024 * 1024
"""Bytes of a JSON request (its commands and environment); files and archives stream instead."""


def _json_body(body: Body) -> dict[str, Any]:
    raw = body.read(MAX_JSON + 1)
    if len(raw) > MAX_JSON:
        raise BadRequest(f"the JSON request is over {MAX_JSON} bytes; send files with PUT /files instead")
    try:
        parsed = json.loads(raw or b"{}")
    except ValueError as exc:
        raise BadRequest(f"the request body is not JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise BadRequest("the request body must be a JSON object")
    return parsed


def _json(payload: Any, status: int = 200) -> Response:
    return status, "application/json", json.dumps(payload).encode()


def dispatch(app: Rocklet, method: str, target: str, body: Body) -> Response:
    """Answer one request; every failure becomes a typed JSON error, so the rocklet always answers."""
    parts, query = split_target(target)
    try:
        return _route(app, method, parts, query, body)
    except RockletError as exc:
        return _json({"error": {"type": type(exc).__name__, "message": str(exc)}}, exc.status)
    except ValueError as exc:  # what the caller sent cannot be used (a NUL byte in a path, a bad number)
        return _json({"error": {"type": "BadRequest", "message": f"bad request: {exc}"}}, 400)
    except Exception as exc:
        message = f"rocklet internal error: {type(exc).__name__}: {exc}"
        return _json({"error": {"type": "RockletError", "message": message}}, 500)


def _route(app: Rocklet, method: str, parts: list[str], query: dict[str, str], raw: Body) -> Response:
    match method, parts:
        case "GET", ["health"]:
            return _json(app.health())
        case "POST", ["sessions"]:
            body = _json_body(raw)
            session = app.create_session(
                _field(body, "name", str), _env(body), _field(body, "cwd", str, None)
            )
            return _json({"name": session.name})
        case "POST", ["sessions", name, "run"]:
            body = _json_body(raw)
            session = app.session(name, create=True)
            return _json(session.run(_field(body, "cmd", str), _timeout(body), _max_output(body)))
        case "DELETE", ["sessions", name]:
            app.close_session(name)
            return _json({"name": name})
        case "POST", ["exec"]:
            body = _json_body(raw)
            cmd = _field(body, "cmd", (str, list))
            if isinstance(cmd, list) and not all(isinstance(arg, str) for arg in cmd):
                raise BadRequest("field 'cmd' must be a string or a list of strings")
            env = {**app.base_env, **(_env(body) or {})}
            cwd = _field(body, "cwd", str, None)
            return _json(run_once(cmd, _timeout(body), cwd, env, _max_output(body)))
        case "GET", ["files"]:
            return 200, "application/octet-stream", files.read_file(_query_path(query, "path"))
        case "PUT", ["files"]:
            path = _query_path(query, "path")
            mode = int(query["mode"], 8) if query.get("mode") else None
            files.write_file(path, raw, mode)
            return _json({"path": path})
        case "PUT", ["archive"]:
            dest = _query_path(query, "dest")
            files.unpack(raw, dest)
            return _json({"dest": dest})
        case "GET", ["archive"]:
            return 200, "application/x-tar", files.pack(_query_path(query, "path"))
        case "POST", ["forwarders"]:
            body = _json_body(raw)
            target = _field(body, "target_socket", str)
            port = app.forwarders.start(_field(body, "port", int), target)
            return _json({"port": port, "target_socket": target})
    raise BadRequest(f"no route {method} /{'/'.join(parts)}; see rock.rocklet.server for the routes")


def _query_path(query: dict[str, str], key: str) -> str:
    if not query.get(key):
        raise BadRequest(f"query parameter {key!r} is required")
    return query[key]


def make_server(socket_path: str, app: Rocklet, token: str | None = None) -> HttpServer:
    """The server on `socket_path`, owner-only; with a token, requests without it are refused (401)."""
    if os.path.lexists(socket_path):
        os.unlink(socket_path)
    # The worker connects as root; no other user of the sandbox's uid on the host needs the socket.
    old_mask = os.umask(0o177)
    try:
        server = HttpServer(
            socket_path, lambda method, target, body: dispatch(app, method, target, body), token
        )
    finally:
        os.umask(old_mask)
    return server
