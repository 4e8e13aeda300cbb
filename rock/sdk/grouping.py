"""`GroupedOpens`: sandboxes of one spec asked for at about the same time come from one group create.

RL asks for a group of episodes of one task at once, rome-bench for a task's attempts; each episode or
attempt still opens its own sandbox from its own thread. Here the first open of a spec waits `window`
seconds for others of the same spec, then one `Sandbox.group` request makes one sandbox for each open that
joined (at most `max_group`), and each open gets its own member, or its member's error.

`FleetCounters` reads back how the admin made them (its Prometheus `/metrics`): how many group creates, of
how many sandboxes each.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from rock.sdk import calls
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


@dataclass(frozen=True)
class FleetCounters:
    group_creates: float
    """Group-create requests the admin answered (a single create is not one)."""
    group_members: float
    """Sandboxes those group creates asked for."""
    sandboxes: float
    """Sandboxes the admin created or failed to create, by either request."""

    def since(self, earlier: FleetCounters) -> FleetCounters:
        return FleetCounters(
            self.group_creates - earlier.group_creates,
            self.group_members - earlier.group_members,
            self.sandboxes - earlier.sandboxes,
        )


def parse_counters(text: str) -> FleetCounters:
    """FleetCounters of an admin's `/metrics` text (a counter the admin has not touched yet counts 0)."""
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            values[sample.name] = values.get(sample.name, 0.0) + sample.value
    return FleetCounters(
        values.get("rock_group_creates_total", 0.0),
        values.get("rock_group_create_size_sum", 0.0),
        values.get("rock_sandbox_creates_total", 0.0),
    )


def fleet_counters(admin_url: str | None = None, api_key: str | None = None) -> FleetCounters:
    """The admin's counters now; raises httpx.HTTPError when it does not answer."""
    url = calls.admin_url(admin_url)
    response = httpx.get(f"{url}/metrics", headers=calls.auth_headers(api_key), timeout=30)
    response.raise_for_status()
    return parse_counters(response.text)
