"""`EnvHub`: the open environments of one host, by handle. Routes and in-process callers share it."""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

from rock.sdk.env_errors import EnvNotFound
from rock.sdk.env_types import EnvList, OpenEnv


class HostedEnv(Protocol):
    def reset(self, seed: int | None = None) -> dict[str, Any]: ...

    def step(self, action: Any) -> dict[str, Any]: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class EnvCaller:
    """Who calls the env routes: `name` owns the environments it makes (only it sees and plays them), and
    `api_key` (None: none needed) is sent to the admin to make their sandboxes, so each one is the caller's
    sandbox, counted against the caller's quota."""

    name: str
    api_key: str | None = None


ANYONE = EnvCaller(name="local")
"""The caller of a host with no API keys (`rock envs serve`, an admin on 127.0.0.1 without keys)."""


@dataclass
class _Entry:
    env_id: str
    env: HostedEnv
    owner: str
    lock: threading.Lock = field(default_factory=threading.Lock)


class EnvHub:
    """Makes environments in sandboxes of the fleet at `admin_url` (None: the SDK's default admin).

    Each environment belongs to the caller that made it: another caller's handle is answered as unknown
    (404), as if it did not exist, so handles cannot be probed either."""

    def __init__(self, admin_url: str | None = None) -> None:
        self.admin_url = admin_url
        self._envs: dict[str, _Entry] = {}
        self._lock = threading.Lock()

    def make(self, env_id: str, kwargs: dict[str, Any] | None = None, caller: EnvCaller = ANYONE) -> str:
        from rock.envs.gem_env import GemSandboxEnv

        env: HostedEnv = GemSandboxEnv(env_id, kwargs or {}, self.admin_url, api_key=caller.api_key)
        handle = f"env-{uuid.uuid4().hex[:12]}"
        with self._lock:
            self._envs[handle] = _Entry(env_id, env, caller.name)
        return handle

    def _entry(self, handle: str, caller: EnvCaller | None) -> _Entry:
        """The caller's environment `handle` (None: any caller's, for the host itself)."""
        with self._lock:
            entry = self._envs.get(handle)
        if entry is None or (caller is not None and entry.owner != caller.name):
            raise EnvNotFound(f"no open environment {handle!r}; make one first (it may have been closed)")
        return entry

    def reset(self, handle: str, seed: int | None = None, caller: EnvCaller = ANYONE) -> dict[str, Any]:
        entry = self._entry(handle, caller)
        with entry.lock:
            return entry.env.reset(seed)

    def step(self, handle: str, action: Any, caller: EnvCaller = ANYONE) -> dict[str, Any]:
        entry = self._entry(handle, caller)
        with entry.lock:
            return entry.env.step(action)

    def close(self, handle: str, caller: EnvCaller | None = ANYONE) -> None:
        entry = self._entry(handle, caller)
        with self._lock:
            self._envs.pop(handle, None)
        with entry.lock:
            entry.env.close()

    def close_all(self) -> None:
        for handle in list(self._envs):
            self.close(handle, caller=None)

    def list(self, caller: EnvCaller = ANYONE) -> EnvList:
        from rock.envs.gem_env import registered_gem_ids

        with self._lock:
            open_envs = [
                OpenEnv(handle=h, env_id=e.env_id) for h, e in self._envs.items() if e.owner == caller.name
            ]
        return EnvList(open=open_envs, registered=registered_gem_ids())
