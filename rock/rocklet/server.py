"""The rocklet's HTTP server on a unix socket (standard library only: it must start fast anywhere).

Routes (JSON unless noted; errors are `{"error": {"type", "message"}}` with the status of the error class):
  GET    /health                      -> Health
  POST   /sessions                    CreateSessionRequest -> {"name"}
  POST   /sessions/<name>/run         RunRequest -> Observation (opens the session on first use)
  DELETE /sessions/<name>             -> {"name"}
  POST   /exec                        ExecRequest -> Observation
  GET    /files?path=P                -> raw bytes
  PUT    /files?path=P[&mode=0o644]   raw bytes -> {"path"}
  PUT    /archive?dest=D              tar bytes -> {"dest"}
  GET    /archive?path=P              -> tar bytes
  POST   /forwarders                  ForwarderRequest -> {"port", "target_socket"}
"""

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from socketserver import ThreadingMixIn, UnixStreamServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from rock.rocklet import files
from rock.rocklet.errors import BadRequest, RockletError, SessionExists, SessionNotFound
from rock.rocklet.forwarder import Forwarders
from rock.rocklet.oneshot import run_once
from rock.rocklet.output import DEFAULT_MAX_OUTPUT
from rock.rocklet.shell import ShellSession, find_shell

VERSION = "1"
DEFAULT_SOCKET = "/run/rock/rocklet.sock"


class Rocklet:
    """What the server can do, independent of HTTP."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.base_env = dict(os.environ)
        self.sessions: dict[str, ShellSession] = {}
        self.sessions_lock = threading.Lock()
        self.forwarders = Forwarders()

    def create_session(self, name: str, env: dict[str, str] | None, cwd: str | None) -> ShellSession:
        with self.sessions_lock:
            if name in self.sessions:
                raise SessionExists(f"session {name!r} is already open; close it first or use another name")
            session = ShellSession(name, {**self.base_env, **(env or {})}, cwd, self.state_dir)
            self.sessions[name] = session
            return session

    def session(self, name: str, create: bool) -> ShellSession:
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


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "RockletServer"

    def log_message(self, format: str, *args: Any) -> None:
        """Requests are not logged: the agent's commands are not the rocklet's business to record."""

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _send_json(self, payload: Any, status: int = 200) -> None:
        self._send(status, json.dumps(payload).encode(), "application/json")

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _json_body(self) -> dict[str, Any]:
        try:
            body = json.loads(self._body() or b"{}")
        except ValueError as exc:
            raise BadRequest(f"the request body is not JSON: {exc}") from None
        if not isinstance(body, dict):
            raise BadRequest("the request body must be a JSON object")
        return body

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {key: values[-1] for key, values in parse_qs(url.query).items()}
        parts = [unquote(part) for part in url.path.strip("/").split("/") if part]
        try:
            self._route(method, parts, query)
        except RockletError as exc:
            self._send_json({"error": {"type": type(exc).__name__, "message": str(exc)}}, exc.status)
        except Exception as exc:  # the rocklet must answer, whatever went wrong inside it
            message = f"rocklet internal error: {type(exc).__name__}: {exc}"
            self._send_json({"error": {"type": "RockletError", "message": message}}, 500)

    def _route(self, method: str, parts: list[str], query: dict[str, str]) -> None:
        app = self.server.rocklet
        match method, parts:
            case "GET", ["health"]:
                self._send_json(app.health())
            case "POST", ["sessions"]:
                body = self._json_body()
                session = app.create_session(
                    _field(body, "name", str), _env(body), _field(body, "cwd", str, None)
                )
                self._send_json({"name": session.name})
            case "POST", ["sessions", name, "run"]:
                body = self._json_body()
                session = app.session(name, create=True)
                self._send_json(session.run(_field(body, "cmd", str), _timeout(body), _max_output(body)))
            case "DELETE", ["sessions", name]:
                app.close_session(name)
                self._send_json({"name": name})
            case "POST", ["exec"]:
                body = self._json_body()
                cmd = _field(body, "cmd", (str, list))
                if isinstance(cmd, list) and not all(isinstance(arg, str) for arg in cmd):
                    raise BadRequest("field 'cmd' must be a string or a list of strings")
                env = {**app.base_env, **(_env(body) or {})}
                cwd = _field(body, "cwd", str, None)
                self._send_json(run_once(cmd, _timeout(body), cwd, env, _max_output(body)))
            case "GET", ["files"]:
                self._send(200, files.read_file(_query_path(query, "path")), "application/octet-stream")
            case "PUT", ["files"]:
                path = _query_path(query, "path")
                mode = int(query["mode"], 8) if query.get("mode") else None
                files.write_file(path, self._body(), mode)
                self._send_json({"path": path})
            case "PUT", ["archive"]:
                dest = _query_path(query, "dest")
                files.unpack(self._body(), dest)
                self._send_json({"dest": dest})
            case "GET", ["archive"]:
                self._send(200, files.pack(_query_path(query, "path")), "application/x-tar")
            case "POST", ["forwarders"]:
                body = self._json_body()
                target = _field(body, "target_socket", str)
                port = app.forwarders.start(_field(body, "port", int), target)
                self._send_json({"port": port, "target_socket": target})
            case _:
                self._body()
                raise BadRequest(
                    f"no route {method} /{'/'.join(parts)}; see rock.rocklet.server for the routes"
                )

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")


def _query_path(query: dict[str, str], key: str) -> str:
    if not query.get(key):
        raise BadRequest(f"query parameter {key!r} is required")
    return query[key]


class RockletServer(ThreadingMixIn, UnixStreamServer):
    daemon_threads = True

    def __init__(self, socket_path: str, rocklet: Rocklet) -> None:
        self.rocklet = rocklet
        if os.path.exists(socket_path):
            os.unlink(socket_path)
        super().__init__(socket_path, Handler)
        # The host side may connect as another uid than the sandbox's.
        os.chmod(socket_path, 0o666)
