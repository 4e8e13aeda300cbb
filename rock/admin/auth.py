"""API keys and the worker credential: who is calling, and whether their quota allows one more sandbox.

Users hold API keys; workers hold the fleet's worker credential. The two never stand in for each other, so a
tenant cannot heartbeat as a worker (and receive other tenants' commands) on any bind address.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from rock.admin.config import AdminConfig, KeyPolicy
from rock.admin.scheduler import Demand
from rock.sdk.errors import Forbidden, QuotaExceeded, Unauthorized
from rock.sdk.types import SandboxInfo, parse_memory
from rock.serving import LOCAL_HOSTS, bearer_token, same_secret

LOCAL = KeyPolicy.model_construct(name="local", key="", max_sandboxes=None, max_cpus=None, max_memory=None)
"""The caller when no keys are configured (only allowed on 127.0.0.1): sees and may touch every sandbox."""


def worker_token(config: AdminConfig) -> str:
    """The configured worker credential, or the one kept in STATE_DIR/worker.token (made on first use)."""
    if config.worker_token is not None:
        return config.worker_token.get_secret_value()
    return read_or_make_token(config.worker_token_path)


def read_or_make_token(path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, "w") as out:
        token = secrets.token_urlsafe(32)
        out.write(token + "\n")
    return token


class Authenticator:
    def __init__(self, keys: list[KeyPolicy], host: str, worker_token: str) -> None:
        if host not in LOCAL_HOSTS and not keys:
            raise ValueError(
                f"binding {host} exposes the admin beyond this machine's 127.0.0.1, so it needs an API key: "
                "pass --api-key KEY (16+ characters) or --keys FILE, or bind 127.0.0.1"
            )
        self._keys = keys
        self._worker_token = worker_token

    @property
    def required(self) -> bool:
        return bool(self._keys)

    def identify(self, authorization: str | None) -> KeyPolicy:
        if not self._keys:
            return LOCAL
        token = bearer_token(authorization)
        if token is None:
            raise Unauthorized("this admin needs an API key: send the header 'Authorization: Bearer KEY'")
        for policy in self._keys:
            if same_secret(policy.key, token):
                return policy
        raise Unauthorized("the API key is not known to this admin; check ROCK_API_KEY or --api-key")

    def check_worker(self, authorization: str | None) -> None:
        """Let through only the worker credential: 401 without it, 403 for a user's API key."""
        token = bearer_token(authorization)
        if token is not None and same_secret(self._worker_token, token):
            return
        if token is not None and any(same_secret(p.key, token) for p in self._keys):
            raise Forbidden(
                "an API key cannot act as a worker: worker routes take the fleet's worker credential "
                "(rock worker serve --token-file ADMIN_STATE_DIR/worker.token, or ROCK_WORKER_TOKEN)"
            )
        raise Unauthorized(
            "worker routes need the fleet's worker credential: send 'Authorization: Bearer TOKEN' with the "
            "admin's worker token (ADMIN_STATE_DIR/worker.token, or the admin's --worker-token)"
        )

    @property
    def worker_token(self) -> str:
        return self._worker_token


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


def may_see(caller: KeyPolicy, info: SandboxInfo) -> bool:
    """Whether `caller` may see (and act on) the sandbox: its owner, or the admin's own calls."""
    return caller is LOCAL or caller.name == info.owner
