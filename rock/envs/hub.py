"""`EnvHub`: the open environments of one host, by handle. Routes and in-process callers share it."""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

from rock.envs.errors import EnvNotFound
from rock.envs.types import EnvList, OpenEnv


class HostedEnv(Protocol):
    def reset(self, seed: int | None = None) -> dict[str, Any]: ...

    def step(self, action: Any) -> dict[str, Any]: ...

    def close(self) -> None: ...


@dataclass
class _Entry:
    env_id: str
    env: HostedEnv
    lock: threading.Lock = field(default_factory=threading.Lock)


class EnvHub:
    """Makes environments in sandboxes of the fleet at `admin_url` (None: the SDK's default admin)."""

    def __init__(self, admin_url: str | None = None) -> None:
        self.admin_url = admin_url
        self._envs: dict[str, _Entry] = {}
        self._lock = threading.Lock()

    def make(self, env_id: str, kwargs: dict[str, Any] | None = None) -> str:
        from rock.envs.gem_env import GemSandboxEnv

        env: HostedEnv = GemSandboxEnv(env_id, kwargs or {}, self.admin_url)
        handle = f"env-{uuid.uuid4().hex[:12]}"
        with self._lock:
            self._envs[handle] = _Entry(env_id, env)
        return handle

    def _entry(self, handle: str) -> _Entry:
        with self._lock:
            entry = self._envs.get(handle)
        if entry is None:
            raise EnvNotFound(f"no open environment {handle!r}; make one first (it may have been closed)")
        return entry

    def reset(self, handle: str, seed: int | None = None) -> dict[str, Any]:
        entry = self._entry(handle)
        with entry.lock:
            return entry.env.reset(seed)

    def step(self, handle: str, action: Any) -> dict[str, Any]:
        entry = self._entry(handle)
        with entry.lock:
            return entry.env.step(action)

    def close(self, handle: str) -> None:
        entry = self._entry(handle)
        with self._lock:
            self._envs.pop(handle, None)
        with entry.lock:
            entry.env.close()

    def close_all(self) -> None:
        for handle in list(self._envs):
            self.close(handle)

    def list(self) -> EnvList:
        from rock.envs.gem_env import registered_gem_ids

        with self._lock:
            open_envs = [OpenEnv(handle=h, env_id=e.env_id) for h, e in self._envs.items()]
        return EnvList(open=open_envs, registered=registered_gem_ids())
