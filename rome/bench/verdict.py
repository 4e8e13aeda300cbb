"""A trial's verdict: passed / failed / agent_error / infra_error, with its cause.

Only `passed` and `failed` say anything about the agent's work on the task. `infra_error` says the trial could
not be judged here (the image did not build, the sandbox was lost, the task needed the network, the verifier
itself crashed), so it never counts as a task failure; `agent_error` is the agent's own fault (it crashed or
ran past its time).
"""

from __future__ import annotations

import re
from typing import Literal

Verdict = Literal["passed", "failed", "agent_error", "infra_error"]
VERDICTS: tuple[Verdict, ...] = ("passed", "failed", "agent_error", "infra_error")

IMAGE_BUILD_FAILED = "image build failed"
NETWORK_NEEDED = "network needed"
VERIFIER_CRASHED = "verifier crashed"
SANDBOX_LOST = "sandbox lost"
TIMEOUT = "timeout"
AGENT_CRASHED = "agent crashed"

# What resolvers, sockets, curl, pip, uv, apt and git print when there is no route out.
# What resolvers, curl, pip, uv, apt and git print when a sandbox has no route out. Only name-resolution and
# no-route failures count: a refused connection to loopback is what a test of a server the agent should have
# started prints, and that is a task failure.
# In order of preference for the line quoted: the resolver's own words beat a tool's summary of them.
_NETWORK_FAILURES = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"Temporary failure in name resolution",
        r"Temporary failure resolving",
        r"Name or service not known",
        r"nodename nor servname provided",
        r"Could not resolve host",
        r"Could not resolve '",
        r"Failed to resolve '",
        r"getaddrinfo failed",
        r"No address associated with hostname",
        r"failed to lookup address information",
        r"Network is unreachable",
        r"dns error",
        # The package cache answering for what it was not seeded with: the task needs more than it holds.
        r"apt-cacher offline",
        r"\(from versions: none\)",
        r"not found in the package registry",
    )
]


# A verifier that never got to judge: its interpreter or test runner is missing, or pytest could not start.
_VERIFIER_CRASH = re.compile(
    r"(?:python3?|pytest|uvx?|bash): (?:command )?not found"
    r"|No such file or directory.*(?:python3?|pytest)"
    r"|ImportError while loading conftest"
    r"|INTERNALERROR>"
    r"|error: unrecognized arguments: --ctrf",
)


def network_failure(text: str) -> str | None:
    """The first line of `text` that shows a DNS or connection failure, or None."""
    match = next((m for p in _NETWORK_FAILURES if (m := p.search(text))), None)
    if match is None:
        return None
    start = text.rfind("\n", 0, match.start()) + 1
    end = text.find("\n", match.end())
    return text[start : end if end != -1 else len(text)].strip()[:300]


def verifier_crash(text: str, exit_code: int | None) -> str | None:
    """Why the verifier could not judge, from its output and exit status, or None when it did judge."""
    match = _VERIFIER_CRASH.search(text)
    if match is not None:
        start = text.rfind("\n", 0, match.start()) + 1
        end = text.find("\n", match.end())
        return text[start : end if end != -1 else len(text)].strip()[:300]
    if exit_code in (126, 127):
        return f"the test command exited with status {exit_code} (a command it needs is missing)"
    return None
