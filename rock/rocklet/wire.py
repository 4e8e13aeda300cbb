"""Minimal HTTP/1.1 over a unix socket: enough for httpx (keep-alive, Content-Length or chunked bodies).

The standard library's http.server pulls in http.client, ssl and email, which is a third of the rocklet's
start-up time; its only client is RockletClient, so this small framing layer serves it instead.
"""

from __future__ import annotations

import contextlib
import re
import socketserver

# hmac.compare_digest itself; importing hmac would load hashlib at every sandbox's start.
from _operator import _compare_digest as compare_digest
from collections.abc import Callable

# Importing typing adds ~4 ms to every sandbox's start; only type checkers need it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import BinaryIO

Producer = Callable[["BinaryIO"], None]
"""Writes a response body of unknown length into the file it is given (sent chunked as it is written)."""
Response = tuple[int, str, "bytes | Producer"]
Dispatch = Callable[[str, str, "Body"], Response]

MAX_LINE = 65536
REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    409: "Conflict",
    422: "Unprocessable Entity",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
PERCENT_ESCAPE = re.compile(rb"%([0-9A-Fa-f]{2})")
UNAUTHORIZED = (
    b'{"error": {"type": "Unauthorized", "message": "this rocklet answers only requests with its sandbox\'s '
    b'token (Authorization: Bearer TOKEN); reach the sandbox through the ROCK admin"}}'
)


class ProtocolError(Exception):
    pass


def unquote(text: str, plus: bool = False) -> str:
    """Percent-decoding as urllib.parse does it (which costs the rocklet's start-up ipaddress and more)."""
    data = text.encode()
    if plus:
        data = data.replace(b"+", b" ")
    return PERCENT_ESCAPE.sub(lambda m: bytes([int(m.group(1), 16)]), data).decode(errors="replace")


def split_target(target: str) -> tuple[list[str], dict[str, str]]:
    """`/a/b%2Fc?x=1&y=%20` -> (["a", "b/c"], {"x": "1", "y": " "}); a repeated key keeps its last value."""
    path, _, query_string = target.partition("?")
    parts = [unquote(part) for part in path.strip("/").split("/") if part]
    query = {}
    for pair in query_string.split("&"):
        if pair:
            key, _, value = pair.partition("=")
            query[unquote(key, plus=True)] = unquote(value, plus=True)
    return parts, query


def _read_line(rfile: BinaryIO) -> bytes:
    line = rfile.readline(MAX_LINE + 1)
    if len(line) > MAX_LINE:
        raise ProtocolError("header line too long")
    return line


class Body:
    """A request's body as a stream: `read(n)` gives at most n bytes (all that is left when n < 0), from a
    Content-Length or a chunked body alike, so an upload passes through without being held in memory."""

    def __init__(self, rfile: BinaryIO, headers: dict[str, str]) -> None:
        self._rfile = rfile
        self._chunked = headers.get("transfer-encoding", "").lower() == "chunked"
        self._left = 0 if self._chunked else int(headers.get("content-length") or 0)
        self.done = not self._chunked and self._left == 0

    def _next_chunk(self) -> None:
        size = int(_read_line(self._rfile).split(b";")[0].strip() or b"0", 16)
        if size == 0:
            while _read_line(self._rfile) not in (b"\r\n", b"\n", b""):
                pass
            self.done = True
        self._left = size

    def read(self, n: int = -1) -> bytes:
        pieces = []
        while not self.done and n != 0:
            if self._left == 0:
                self._next_chunk()
                continue
            piece = self._rfile.read(self._left if n < 0 else min(n, self._left))
            if not piece:
                raise ProtocolError("the request body ended early")
            self._left -= len(piece)
            pieces.append(piece)
            n = n - len(piece) if n > 0 else n
            if self._left == 0 and self._chunked:
                _read_line(self._rfile)
            elif self._left == 0:
                self.done = True
        return b"".join(pieces)


class Handler(socketserver.StreamRequestHandler):
    server: HttpServer

    def handle(self) -> None:
        while True:
            try:
                request_line = _read_line(self.rfile)
                if not request_line:
                    return
                if not request_line.strip():
                    continue
                method, target, version = request_line.decode("latin-1").split()
                headers = {}
                while (line := _read_line(self.rfile)) not in (b"\r\n", b"\n", b""):
                    name, _, value = line.decode("latin-1").partition(":")
                    headers[name.strip().lower()] = value.strip()
                if not self.server.authorized(headers.get("authorization", "")):
                    # Refused before its body is read: a caller without the token costs no memory.
                    self._respond(401, "application/json", UNAUTHORIZED, keep_alive=False)
                    return
                body = Body(self.rfile, headers)
            except (ProtocolError, ValueError):
                self._respond(400, "text/plain", b"malformed HTTP request", keep_alive=False)
                return
            status, content_type, payload = self.server.dispatch(method, target, body)
            # A body the route did not read to its end leaves the stream mid-request: close it.
            keep_alive = (
                version == "HTTP/1.1" and headers.get("connection", "").lower() != "close" and body.done
            )
            if callable(payload):
                if not self._stream(status, content_type, payload, keep_alive):
                    return
            else:
                self._respond(status, content_type, payload, keep_alive)
            if not keep_alive:
                return

    def _stream(self, status: int, content_type: str, produce: Producer, keep_alive: bool) -> bool:
        """Send what `produce` writes as a chunked body; False when it failed midway: the connection is
        then dropped without the last chunk, so the client sees a broken body, never a short one."""
        connection = "" if keep_alive else "Connection: close\r\n"
        head = (
            f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\n"
            f"Content-Type: {content_type}\r\nTransfer-Encoding: chunked\r\n{connection}\r\n"
        )
        try:
            self.wfile.write(head.encode("latin-1"))
            produce(ChunkedWriter(self.wfile))
            self.wfile.write(b"0\r\n\r\n")
        except Exception:  # a file that vanished or failed to read, or the client went away
            return False
        return True

    def _respond(self, status: int, content_type: str, payload: bytes, keep_alive: bool) -> None:
        connection = "" if keep_alive else "Connection: close\r\n"
        head = (
            f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\n"
            f"Content-Type: {content_type}\r\nContent-Length: {len(payload)}\r\n{connection}\r\n"
        )
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(head.encode("latin-1") + payload)


class ChunkedWriter:
    """A file whose writes go out as HTTP/1.1 chunks."""

    def __init__(self, wfile: BinaryIO) -> None:
        self._wfile = wfile

    def write(self, data: bytes) -> int:
        if data:
            self._wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        return len(data)

    def flush(self) -> None:
        self._wfile.flush()


class HttpServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """One thread per connection; `dispatch(method, target, body) -> (status, content type, payload)`."""

    daemon_threads = True

    def __init__(self, socket_path: str, dispatch: Dispatch, token: str | None = None) -> None:
        self.dispatch = dispatch
        self.expected = None if token is None else f"Bearer {token}".encode()
        super().__init__(socket_path, Handler)

    def authorized(self, authorization: str) -> bool:
        if self.expected is None:
            return True
        return compare_digest(authorization.encode("latin-1", errors="replace"), self.expected)
