"""The admin's create counters (from its Prometheus `/metrics`), for a caller that wants to see how its
sandboxes were made: how many group creates, of how many sandboxes each."""

from __future__ import annotations

from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

from rock.sdk import calls


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
