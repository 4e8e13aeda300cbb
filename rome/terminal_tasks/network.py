"""What a task asks of the network, and what a run grants it: `none | packages | allowlist | full`.

Tasks spell their wish many ways: Harbor's `[environment].allow_internet`, `network_mode` in `[environment]`,
`[agent]` or `[verifier]` (`public | no-network | allowlist`, with `allowed_hosts`), and the same keys in
`[X.network]` tables. They all read into one `NetworkNeeds` per phase; the environment's mode is the default
of both. A run grants `allowlist` and `full` only when its operator allowed the internet
(`--allow-internet`); otherwise such a wish becomes `packages`, with a note.

Each phase gets its own policy (`phase_policies`): a sandbox that can switch its network in place
(`set_network`) is made with the larger of the two and narrowed for the phase that asks for less; one that
cannot keeps one network for both phases, and the trial records that both had it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

Policy = Literal["none", "packages", "allowlist", "full"]
POLICIES: tuple[Policy, ...] = ("none", "packages", "allowlist", "full")
Phase = Literal["agent", "verifier"]

_MODES: dict[str, Policy] = {
    "no-network": "none",
    "none": "none",
    "allowlist": "allowlist",
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
    if wanted in ("full", "allowlist") and not allow_internet:
        what = "the internet" if wanted == "full" else "an allowlist of hosts"
        wanted = "packages"
        note = f"the task asks for {what}; granted packages only (no --allow-internet)"
    else:
        note = None
    if wanted == "packages" and not package_cache:
        extra = "no package cache is running (start the fleet with --package-cache)"
        return "none", f"{note}; {extra}" if note else f"the task asks for packages; {extra}"
    return wanted, note


def phase_policies(needs: NetworkNeeds, sandbox_policy: str, can_switch: bool) -> dict[Phase, Policy]:
    """What each phase has inside a sandbox made with `sandbox_policy` (the grant of `needs.most`).

    Granting is monotone (a larger wish never gets less), so a phase's own grant is the smaller of its wish
    and the sandbox's policy; without an in-place switch both phases have the sandbox's."""
    have = sandbox_policy if sandbox_policy in POLICIES else "none"
    if not can_switch:
        return {"agent": have, "verifier": have}  # type: ignore[dict-item]
    narrowest = {
        phase: min(wish, have, key=POLICIES.index)
        for phase, wish in (("agent", needs.agent), ("verifier", needs.verifier))
    }
    return narrowest  # type: ignore[return-value]


def allowlist_cidrs(hosts: tuple[str, ...]) -> list[str]:
    """The IPv4 networks an `allowlist` sandbox may reach: each host's addresses as /32, CIDRs as given.

    Raises ValueError when nothing resolves: an empty egress list means "anywhere" to ROCK, so an allowlist
    that names nothing reachable must never become one."""
    import ipaddress
    import socket

    cidrs: set[str] = set()
    for host in hosts:
        try:
            cidrs.add(str(ipaddress.IPv4Network(host, strict=False)))
            continue
        except ValueError:
            pass
        try:
            infos = socket.getaddrinfo(host, None, family=socket.AF_INET)
        except OSError:
            continue
        cidrs.update(f"{info[4][0]}/32" for info in infos)
    if not cidrs:
        raise ValueError(f"none of the allowed hosts {list(hosts)} resolves to an IPv4 address here")
    return sorted(cidrs)
