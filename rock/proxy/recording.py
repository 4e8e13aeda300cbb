"""Deploy mode (upstream API, JSONL recording) and replay mode (answers from a recording, in order)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

from rock.proxy.errors import ProxyError
from rock.proxy.sse import StreamAssembler
from rock.proxy.types import Recording
from rock.proxy.upstream import RETRYABLE_STATUS, Upstream, upstream_error


class Recorder:
    """Appends one `Recording` per answered call to a JSONL file (or keeps none when there is no path)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, recording: Recording) -> None:
        if self.path is None:
            return
        line = recording.model_dump_json() + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as handle:
            handle.write(line)


class DeployMode:
    def __init__(self, upstream: Upstream, recorder: Recorder) -> None:
        self.upstream = upstream
        self.recorder = recorder

    def _request(self, body: dict[str, Any]) -> dict[str, Any]:
        config = self.upstream.config
        return body | config.request_extra | ({"model": config.model} if config.model else {})

    async def complete(self, body: dict[str, Any], episode_id: str | None) -> dict[str, Any]:
        started = time.perf_counter()
        request = self._request(body)
        response = await self.upstream.post_json("/chat/completions", request)
        self.recorder.write(
            Recording(
                request=request,
                response=response,
                episode_id=episode_id,
                latency_s=time.perf_counter() - started,
            )
        )
        return response

    async def open_stream(self, body: dict[str, Any], episode_id: str | None) -> AsyncIterator[str]:
        """The upstream stream (retried before its first byte) as lines, recorded whole at its end."""
        started = time.perf_counter()
        request = self._request(body)
        response = await self._connect(request)

        async def lines() -> AsyncIterator[str]:
            assembler = StreamAssembler()
            recorded = False

            def record() -> None:
                nonlocal recorded
                if not recorded:
                    recorded = True
                    self.recorder.write(
                        Recording(
                            request=request,
                            response=assembler.result(),
                            episode_id=episode_id,
                            latency_s=time.perf_counter() - started,
                        )
                    )

            try:
                async for line in response.aiter_lines():
                    assembler.feed_line(line)
                    # Before the agent reads the end: an agent that hangs up right after `[DONE]` cancels this
                    # generator at its next step, and its call would otherwise go unrecorded.
                    if assembler.done:
                        record()
                    yield line + "\n"
                record()
            finally:
                await response.aclose()

        return lines()

    async def _connect(self, request: dict[str, Any]) -> httpx.Response:
        config = self.upstream.config
        http = self.upstream.http
        for attempt in range(config.max_retries + 1):
            last = attempt == config.max_retries
            try:
                response = await http.send(
                    http.build_request("POST", "/chat/completions", json=request), stream=True
                )
            except httpx.TransportError as error:
                if last:
                    raise ProxyError(
                        f"the upstream {self.upstream.base_url} is unreachable ({error}); check "
                        "that it runs and the URL is right",
                        status=502,
                        code="upstream_unreachable",
                    ) from error
            else:
                if response.status_code in RETRYABLE_STATUS and not last:
                    await response.aclose()
                elif response.is_error:
                    await response.aread()
                    await response.aclose()
                    raise upstream_error(response)
                else:
                    return response
            await asyncio.sleep(config.backoff_s * 2**attempt)
        raise AssertionError("unreachable: the last attempt returns or raises")


class ReplayMode:
    """Answers call i with the i-th recorded response, whatever the request."""

    def __init__(self, path: Path) -> None:
        if not path.is_file():
            raise ProxyError(f"replay recording {path} does not exist; record one in deploy mode (--record)")
        self.path = path
        self.recordings = [
            Recording.model_validate_json(line)
            for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()
        ]
        self._next = 0
        self._lock = threading.Lock()

    def complete(self) -> dict[str, Any]:
        with self._lock:
            if self._next >= len(self.recordings):
                raise ProxyError(
                    f"the recording {self.path} is used up: all {len(self.recordings)} answers were given; "
                    "record a longer session or restart the proxy to replay from the start",
                    status=410,
                    code="recording_exhausted",
                )
            recording = self.recordings[self._next]
            self._next += 1
        return json.loads(json.dumps(recording.response))
