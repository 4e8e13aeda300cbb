"""Prometheus metrics of one admin (its own registry, so several admins can share a process in tests)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class AdminMetrics:
    def __init__(self, waiting: Callable[[], int], workers: Callable[[], int]) -> None:
        self.registry = CollectorRegistry()
        self.creates = Counter(
            "rock_sandbox_creates", "Sandbox creates by outcome", ["outcome"], registry=self.registry
        )
        self.create_seconds = Histogram(
            "rock_sandbox_create_seconds",
            "Seconds from create request to running sandbox (queue wait included)",
            buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120),
            registry=self.registry,
        )
        self.failures = Counter(
            "rock_sandbox_failures", "Failed sandboxes by reason", ["reason"], registry=self.registry
        )
        self.requests = Counter(
            "rock_sandbox_requests", "Requests forwarded to sandboxes", ["op"], registry=self.registry
        )
        self.groups = Counter(
            "rock_group_creates",
            "Group creates (one request for N sandboxes of one spec)",
            registry=self.registry,
        )
        self.group_size = Histogram(
            "rock_group_create_size",
            "Sandboxes asked for per group create",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024),
            registry=self.registry,
        )
        self.pool = Counter(
            "rock_warm_pool_takes",
            "Creates that matched a warm pool's spec, by whether a started sandbox was there (hit) or not",
            ["outcome"],
            registry=self.registry,
        )
        self.live = Gauge("rock_sandboxes_live", "Sandboxes pending or running", registry=self.registry)
        Gauge("rock_admission_waiting", "Creates waiting for room", registry=self.registry).set_function(
            waiting
        )
        Gauge("rock_workers", "Workers with a recent heartbeat", registry=self.registry).set_function(workers)
