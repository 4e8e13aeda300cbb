"""GEM environments hosted on ROCK: each in its own sandbox, behind `make/reset/step/close/list` routes.

`rock.envs.make(env_id, url=...)` is the client; `rock envs serve --admin URL` the service (or mount
`rock.envs.routes.env_router(EnvHub(admin_url))` in another app). Terminal tasks are environments of the task
library (`rome.terminal_tasks.env`), which drives their sandboxes through the SDK.
"""

import importlib
from typing import Any

_EXPORTS = {
    "RemoteEnv": "rock.envs.client",
    "list_envs": "rock.envs.client",
    "make": "rock.envs.client",
    "EnvError": "rock.envs.errors",
    "EnvNotFound": "rock.envs.errors",
    "UnknownEnvId": "rock.envs.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:  # loaded on first use, so `rock --help` stays fast
    if name not in _EXPORTS:
        raise AttributeError(f"module 'rock.envs' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
