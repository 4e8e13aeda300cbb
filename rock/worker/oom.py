"""Which of a worker's sandboxes were OOM-killed: Docker's `oom` events plus each container's cgroup counter
(a kill inside a container that keeps running leaves no other trace)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import docker

from rock.worker import containers

log = logging.getLogger("rock.worker")


class OomWatch:
    def __init__(self) -> None:
        self._killed: set[str] = set()
        self._counters: dict[str, tuple[Path, str]] = {}
        self._events: object = None
        self._closing = False

    def watch(self, sandbox_id: str, container_id: str) -> None:
        counter = containers.oom_counter(container_id)
        if counter is not None:
            self._counters[sandbox_id] = counter

    def killed(self, sandbox_id: str) -> bool:
        counter = self._counters.get(sandbox_id)
        if counter is not None and containers.oom_kills(counter) > 0:
            self._killed.add(sandbox_id)
        return sandbox_id in self._killed

    def killed_ids(self) -> set[str]:
        """Every watched sandbox's counter read again, then the ids known to be OOM-killed."""
        for sandbox_id in list(self._counters):
            self.killed(sandbox_id)
        return set(self._killed)

    def forget(self, sandbox_id: str) -> None:
        self._killed.discard(sandbox_id)
        self._counters.pop(sandbox_id, None)

    def follow_events(self, client: Callable[[], docker.DockerClient], worker_id: str) -> None:
        """Docker's `oom` events, so an OOM-kill inside a still-running container is noticed too. The stream
        ends when `close` is called, or when dockerd restarts: then it is opened again."""
        while not self._closing:
            try:
                self._events = client().events(
                    decode=True,
                    filters={"event": "oom", "label": f"{containers.LABEL_WORKER}={worker_id}"},
                )
                for event in self._events:  # type: ignore[attr-defined]
                    sandbox_id = event.get("Actor", {}).get("Attributes", {}).get(containers.LABEL_SANDBOX)
                    if sandbox_id:
                        log.warning("sandbox %s was OOM-killed", sandbox_id)
                        self._killed.add(sandbox_id)
            except Exception as exc:  # closed by the worker, or dockerd went away
                log.debug("oom event stream ended: %r", exc)
            if not self._closing:
                time.sleep(1.0)

    def close(self) -> None:
        self._closing = True
        if self._events is not None:
            self._events.close()  # type: ignore[attr-defined]
