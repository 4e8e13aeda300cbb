"""What a task asks of the network, and what a run grants it: `none | packages | full`.

Tasks spell their wish many ways: Harbor's `[environment].allow_internet`, `network_mode` in `[environment]`,
`[agent]` or `[verifier]` (`public | no-network | allowlist`), and the same keys in `[X.network]` tables.
They all read into one `NetworkNeeds` per phase. A run grants `full` only when its operator allowed the
internet (`--allow-internet`); otherwise a wish for more than packages becomes `packages`, with a note.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

Policy = Literal["none", "packages", "full"]
POLICIES: tuple[Policy, ...] = ("none", "packages", "full")
Phase = Literal["agent", "verifier"]

_MODES: dict[str, Policy] = {
    "no-network": "none",
    "none": "none",
    "allowlist": "packages",
    "packages": "packages",
    "public": "full",
    "bridge": "full",
    "host": "full",
    "full": "full",
}


class NetworkNeeds(BaseModel):
    """The network a task asks for in each phase, and the keys it said so with (for `check`)."""

    model_config = ConfigDict(frozen=True)

    # A task that says nothing gets packages: Harbor and Terminal-Bench both default to a networked sandbox,
    # and package installs are what such tasks use it for.
    agent: Policy = "packages"
    verifier: Policy = "packages"
    allowed_hosts: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()

    @property
    def most(self) -> Policy:
        """The larger of the two phases' wishes: a sandbox gets one network for its whole life."""
        return max(self.agent, self.verifier, key=POLICIES.index)


def _mode(value: Any, key: str) -> Policy:
    if isinstance(value, bool):
        return "full" if value else "none"
    if isinstance(value, str) and value.lower() in _MODES:
        return _MODES[value.lower()]
    raise ValueError(f"{key} = {value!r} is not a network mode; use one of {', '.join(sorted(_MODES))}")


def _section_mode(section: Any, name: str, keys: list[str], hosts: list[str]) -> Policy | None:
    """The mode a table sets directly (`network_mode`, `allow_internet`) or in its `network` sub-table."""
    if not isinstance(section, dict):
        return None
    found: Policy | None = None
    for table, prefix in ((section, name), (section.get("network"), f"{name}.network")):
        if not isinstance(table, dict):
            continue
        for key in ("network_mode", "mode", "allow_internet"):
            if key in table and (prefix != name or key != "mode"):
                found = _mode(table[key], f"[{prefix}].{key}")
                keys.append(f"[{prefix}].{key}")
        hosts += [str(h) for h in table.get("allowed_hosts", [])]
    return found


def read_needs(raw: dict[str, Any]) -> NetworkNeeds:
    """`NetworkNeeds` from a parsed task.toml; the environment's mode is the default of both phases."""
    keys: list[str] = []
    hosts: list[str] = []
    base = _section_mode(raw.get("environment"), "environment", keys, hosts) or "packages"
    agent = _section_mode(raw.get("agent"), "agent", keys, hosts) or base
    verifier = _section_mode(raw.get("verifier"), "verifier", keys, hosts) or base
    return NetworkNeeds(agent=agent, verifier=verifier, allowed_hosts=tuple(hosts), keys=tuple(keys))


def grant(wanted: Policy, allow_internet: bool, package_cache: bool) -> tuple[Policy, str | None]:
    """The policy a sandbox gets for a wish, and a note when it gets less than it asked for."""
    if wanted == "full" and not allow_internet:
        wanted = "packages"
        note = "the task asks for the internet; granted packages only (no --allow-internet)"
    else:
        note = None
    if wanted == "packages" and not package_cache:
        extra = "no package cache is running (start the fleet with --package-cache)"
        return "none", f"{note}; {extra}" if note else f"the task asks for packages; {extra}"
    return wanted, note
