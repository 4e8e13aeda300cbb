"""API keys: who is calling, and whether their quota allows one more sandbox."""

from __future__ import annotations

import hmac

from rock.admin.config import KeyPolicy
from rock.admin.scheduler import Demand
from rock.sdk.errors import QuotaExceeded, Unauthorized
from rock.sdk.types import parse_memory

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})

LOCAL = KeyPolicy.model_construct(name="local", key="", max_sandboxes=None, max_cpus=None, max_memory=None)
"""The caller when no keys are configured (only allowed on 127.0.0.1): sees and may touch every sandbox."""


class Authenticator:
    def __init__(self, keys: list[KeyPolicy], host: str) -> None:
        if host not in LOCAL_HOSTS and not keys:
            raise ValueError(
                f"binding {host} exposes the admin beyond this machine's 127.0.0.1, so it needs an API key: "
                "pass --api-key KEY (16+ characters) or --keys FILE, or bind 127.0.0.1"
            )
        self._keys = keys

    @property
    def required(self) -> bool:
        return bool(self._keys)

    def identify(self, authorization: str | None) -> KeyPolicy:
        if not self._keys:
            return LOCAL
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise Unauthorized("this admin needs an API key: send the header 'Authorization: Bearer KEY'")
        for policy in self._keys:
            if hmac.compare_digest(policy.key.encode(), token.strip().encode()):
                return policy
        raise Unauthorized("the API key is not known to this admin; check ROCK_API_KEY or --api-key")

    def secret_of(self, name: str) -> str | None:
        return next((p.key for p in self._keys if p.name == name), None)


def check_quota(policy: KeyPolicy, usage: tuple[int, float, int], demand: Demand) -> None:
    """Raise QuotaExceeded if one more sandbox of `demand` would put `policy` over its quota."""
    count, cpus, memory = usage
    if policy.max_sandboxes is not None and count + 1 > policy.max_sandboxes:
        raise QuotaExceeded(
            f"key {policy.name!r} already holds {count} sandboxes (quota {policy.max_sandboxes}); "
            "delete one first"
        )
    if policy.max_cpus is not None and cpus + demand.cpus > policy.max_cpus + 1e-9:
        raise QuotaExceeded(
            f"key {policy.name!r} would hold {cpus + demand.cpus:g} CPUs (quota {policy.max_cpus:g}); "
            "ask for fewer CPUs or delete a sandbox"
        )
    if policy.max_memory is not None and memory + demand.memory > parse_memory(policy.max_memory):
        raise QuotaExceeded(
            f"key {policy.name!r} would hold {memory + demand.memory} bytes of memory (quota "
            f"{policy.max_memory}); ask for less memory or delete a sandbox"
        )
