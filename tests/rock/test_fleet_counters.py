"""The admin's create counters as a caller reads them from /metrics."""

from __future__ import annotations

from prometheus_client import generate_latest

from rock.admin.metrics import AdminMetrics
from rock.sdk.grouping import FleetCounters, parse_counters


def test_counters_are_read_from_the_admins_own_metrics_and_differenced() -> None:
    metrics = AdminMetrics(waiting=lambda: 0, workers=lambda: 1)
    assert parse_counters(generate_latest(metrics.registry).decode()) == FleetCounters(0.0, 0.0, 0.0)
    for size in (4, 4, 2):
        metrics.groups.inc()
        metrics.group_size.observe(size)
    metrics.creates.labels("running").inc(9)
    metrics.creates.labels("failed").inc(1)
    first = parse_counters(generate_latest(metrics.registry).decode())
    assert first == FleetCounters(group_creates=3.0, group_members=10.0, sandboxes=10.0)
    metrics.creates.labels("running").inc()  # a single create: a sandbox, no group create
    later = parse_counters(generate_latest(metrics.registry).decode())
    assert later.since(first) == FleetCounters(group_creates=0.0, group_members=0.0, sandboxes=1.0)
