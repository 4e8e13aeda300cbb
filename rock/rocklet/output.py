"""Capped command output: the first and last part of a stream are kept, the middle is counted and dropped.

A command may print gigabytes; the rocklet keeps reading (so the command never blocks on a full pipe) but
holds at most `limit` bytes, and the result says how much it dropped with a visible marker.
"""

DEFAULT_MAX_OUTPUT = 1 << 20


def truncation_marker(dropped: int) -> str:
    return f"\n[... {dropped} bytes of output truncated ...]\n"


def timeout_notice(timeout: float) -> str:
    return f"\n[command timed out after {timeout:g} s; its processes were killed]\n"


class CappedOutput:
    """Keeps the first half and the last half of `limit` bytes of everything fed to it."""

    def __init__(self, limit: int = DEFAULT_MAX_OUTPUT) -> None:
        self.head_limit = max(limit // 2, 0)
        self.tail_limit = max(limit - self.head_limit, 0)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data or self.tail_limit == 0:
            return
        self.tail += data
        # Trim lazily so a stream of small chunks does not cost a copy per chunk.
        if len(self.tail) > 2 * self.tail_limit:
            del self.tail[: len(self.tail) - self.tail_limit]

    def _kept_tail(self) -> bytes:
        return bytes(self.tail[-self.tail_limit :]) if self.tail_limit else b""

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head) + len(self._kept_tail())

    def text(self) -> str:
        tail = self._kept_tail()
        head = self.head.decode("utf-8", errors="replace")
        if not self.truncated:
            return head + tail.decode("utf-8", errors="replace")
        dropped = self.total - len(self.head) - len(tail)
        return head + truncation_marker(dropped) + tail.decode("utf-8", errors="replace")


def observation(
    output: CappedOutput, exit_code: int | None, duration: float, timed_out: bool, timeout: float
) -> dict[str, object]:
    """The wire form of `rock.observation.Observation`."""
    text = output.text()
    if timed_out:
        text += timeout_notice(timeout)
    return {
        "output": text,
        "exit_code": None if timed_out else exit_code,
        "truncated": output.truncated,
        "duration": round(duration, 6),
        "timed_out": timed_out,
    }
