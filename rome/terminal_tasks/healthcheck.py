"""Polling a task's healthcheck inside its sandbox, with Docker HEALTHCHECK's rules.

- Each probe runs `command` under `timeout_sec`; exit status 0 within the time is a success.
- During `start_period_sec` (counted from the first probe) probes come every `start_interval_sec` and a
  failure does not count; a success ends the wait at once, as it would in Docker.
- After it, probes come every `interval_sec`, and `retries` consecutive failures make the check fail.

One difference from Docker: the first probe runs at once rather than one interval after start, because here
the check gates a phase that is waiting for it; nothing else runs in between.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from pydantic import BaseModel

from rome.terminal_tasks.harbor_fields import Healthcheck
from rome.terminal_tasks.sandbox import TrialSandbox


class HealthReport(BaseModel):
    healthy: bool
    probes: int
    failures: int
    seconds: float
    last_output: str = ""

    def describe(self, where: str) -> str:
        state = "healthy" if self.healthy else f"unhealthy after {self.failures} counted failure(s)"
        tail = "" if self.healthy else f"; last output: {self.last_output.strip()[-300:]!r}"
        return f"{where} healthcheck {state} ({self.probes} probe(s), {self.seconds:.1f} s){tail}"


def wait_healthy(
    sandbox: TrialSandbox,
    check: Healthcheck,
    env: dict[str, str] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> HealthReport:
    """Probe until the check passes or has failed `retries` times in a row past its start period."""
    started = clock()
    probes = failures = 0
    output = ""
    while True:
        probes += 1
        result = sandbox.run(check.command, timeout=check.timeout_sec, env=env or None)
        output = result.output
        if result.exit_code == 0 and not result.timed_out:
            return HealthReport(healthy=True, probes=probes, failures=failures, seconds=clock() - started)
        in_start_period = clock() - started < check.start_period_sec
        if not in_start_period:
            failures += 1
            if failures >= check.retries:
                return HealthReport(
                    healthy=False,
                    probes=probes,
                    failures=failures,
                    seconds=clock() - started,
                    last_output=output,
                )
        sleep(check.start_interval_sec if in_start_period else check.interval_sec)
