"""What the `packages` forwarder lets through: one read-only HTTP request per connection.

The bytes a sandbox sends to the package cache are parsed, not carried blindly: only GET and HEAD, with no
body, on the paths a cache exists for (devpi's mirror index; apt-cacher's configured mirrors). The request
head is rebuilt from what was parsed (so the cache sees exactly what was checked) with `Connection: close`,
and the connection ends with the answer, so nothing after the checked request reaches the cache. Uploads,
logins and index changes (PUT, POST, PATCH, DELETE) are answered 405 here and never reach devpi. The one
exception is CONNECT to uv's installer hosts, which the worker answers itself (rock.worker.installers).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import dataclass

MAX_HEAD = 64 * 1024
HEAD_TIMEOUT_S = 30.0
READ_METHODS = ("GET", "HEAD")
HOP_HEADERS = {"connection", "keep-alive", "proxy-connection", "te", "upgrade", "proxy-authorization"}
TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


class Refused(Exception):
    def __init__(self, status: int, reason: str, why: str) -> None:
        super().__init__(why)
        self.status, self.reason = status, reason


@dataclass(frozen=True)
class Request:
    method: str
    target: str
    version: str
    headers: list[tuple[str, str]]

    def head(self) -> bytes:
        """The request as the cache gets it: parsed headers, hop-by-hop ones replaced by `close`."""
        lines = [f"{self.method} {self.target} {self.version}"]
        lines += [f"{name}: {value}" for name, value in self.headers if name.lower() not in HOP_HEADERS]
        lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def parse_head(raw: bytes, connect: bool = False) -> Request:
    """A request head (up to and including the blank line), or Refused when it is not plain HTTP/1.x.
    `connect`: CONNECT is also let through (to the installer responder, rock.worker.installers)."""
    text = raw.decode("latin-1")
    lines = text[: -len("\r\n\r\n")].split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise Refused(400, "Bad Request", "not an HTTP/1.x request line")
    method, target, version = parts
    headers = []
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not TOKEN.match(name) or "\n" in line or "\r" in line:
            raise Refused(400, "Bad Request", f"malformed header line {line[:80]!r}")
        headers.append((name, value.strip()))
    if method not in READ_METHODS and not (connect and method == "CONNECT"):
        raise Refused(405, "Method Not Allowed", f"{method[:20]} is refused: the package cache is read-only")
    for name, value in headers:
        lowered = name.lower()
        if lowered == "transfer-encoding" or (lowered == "content-length" and value != "0"):
            raise Refused(400, "Bad Request", "a read request carries no body")
    return Request(method, target, version, headers)


async def read_head(reader: asyncio.StreamReader) -> bytes:
    try:
        return await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
    except asyncio.LimitOverrunError:
        raise Refused(431, "Request Header Fields Too Large", "the request head is too long") from None
    except (asyncio.IncompleteReadError, TimeoutError, ConnectionError):
        raise Refused(400, "Bad Request", "the request head did not arrive whole") from None


def answer_head(status: int, reason: str, length: int, content_type: str = "text/plain") -> bytes:
    head = f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n"
    return f"{head}Content-Length: {length}\r\nConnection: close\r\n\r\n".encode()


def refusal(error: Refused) -> bytes:
    body = f"rock package cache: {error}\n".encode()
    head = f"HTTP/1.1 {error.status} {error.reason}\r\nContent-Type: text/plain\r\n"
    if error.status == 405:
        head += "Allow: GET, HEAD\r\n"
    head += f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    return head.encode() + body


TargetRule = Callable[[str], str | None]


def pypi_rule(index: str) -> TargetRule:
    """devpi: only the mirror index (`/root/pypi/...`: its simple pages and files), origin-form."""

    def check(target: str) -> str | None:
        path = target.split("?", 1)[0]
        escaped = re.search(r"%2[ef]", path, re.IGNORECASE)
        if not path.startswith(index) or escaped or "/../" in path or path.endswith("/.."):
            return f"only the package index {index} is served"
        return None

    return check
