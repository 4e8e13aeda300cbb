"""`GroupedOpens`: sandboxes of one spec asked for at about the same time come from one group create.

RL asks for a group of episodes of one task at once, rome-bench for a task's attempts; each episode or
attempt still opens its own sandbox from its own thread. Here the first open of a spec waits `window`
seconds for others of the same spec, then one `Sandbox.group` request makes one sandbox for each open that
joined (at most `max_group`), and each open gets its own member, or its member's error.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from rock.sdk.errors import RockError
from rock.sdk.sandbox import Sandbox, SandboxGroup, error_of

WINDOW = 0.2
"""Seconds the first open of a spec waits for others: small next to a sandbox's start (about 0.5 s)."""


@dataclass
class _Batch:
    size: int = 1
    ready: threading.Event = field(default_factory=threading.Event)
    group: SandboxGroup[Sandbox] | None = None
    error: BaseException | None = None


class GroupedOpens:
    def __init__(self, window: float = WINDOW, max_group: int = 64) -> None:
        self.window, self.max_group = window, max_group
        self._lock = threading.Lock()
        self._forming: dict[str, _Batch] = {}
        self.groups = 0
        """Group creates sent so far."""

    def open(self, **options: Any) -> Sandbox:
        """A running sandbox made with `Sandbox.group(n, **options)` together with the other opens of the same
        options in the window; raises its member's error (a RockError) when that member did not start."""
        key = json.dumps(options, sort_keys=True, default=str)
        with self._lock:
            batch = self._forming.get(key)
            if batch is None:
                batch, index = _Batch(), 0
                self._forming[key] = batch
            else:
                index, batch.size = batch.size, batch.size + 1
                if batch.size >= self.max_group:
                    del self._forming[key]
        if index == 0:
            self._create(key, batch, options)
        batch.ready.wait()
        if batch.error is not None:
            raise batch.error
        assert batch.group is not None
        running = batch.group.sandboxes
        if index < len(running):
            return running[index]
        raise error_of(batch.group.failed[index - len(running)])

    def _create(self, key: str, batch: _Batch, options: dict[str, Any]) -> None:
        time.sleep(self.window)
        with self._lock:
            if self._forming.get(key) is batch:
                del self._forming[key]
            size = batch.size
        try:
            self.groups += 1
            batch.group = Sandbox.group(size, **options)
        except BaseException as exc:  # the opens that joined hear of it too, and never wait forever
            batch.error = exc
            if not isinstance(exc, RockError):
                raise
        finally:
            batch.ready.set()
