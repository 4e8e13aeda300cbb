"""The ROCK SDK: `Sandbox`, `AsyncSandbox`, `Images` and `AsyncImages` (images built or resolved by the
fleet), their wire types and typed errors; `make`, the client of GEM environments hosted on ROCK
(`rock.envs`).

Names load on first use, so `rock --help` (which imports `rock.sdk.cli`) does not pay for httpx and pydantic.
"""

import importlib

_EXPORTS = {
    "AsyncSandbox": "rock.sdk.sandbox",
    "Sandbox": "rock.sdk.sandbox",
    "SandboxGroup": "rock.sdk.sandbox",
    "SandboxOptions": "rock.sdk.sandbox",
    "AsyncImages": "rock.sdk.images",
    "Images": "rock.sdk.images",
    "ImageInfo": "rock.sdk.types",
    "ImageRequest": "rock.sdk.types",
    "CapacityExceeded": "rock.sdk.errors",
    "CommandTimeout": "rock.sdk.errors",
    "ImageFailed": "rock.sdk.errors",
    "QuotaExceeded": "rock.sdk.errors",
    "RockError": "rock.sdk.errors",
    "SandboxFailed": "rock.sdk.errors",
    "SandboxNotFound": "rock.sdk.errors",
    "FailureReason": "rock.sdk.types",
    "Observation": "rock.sdk.types",
    "SandboxInfo": "rock.sdk.types",
    "SandboxSpec": "rock.sdk.types",
    "SandboxState": "rock.sdk.types",
    "RemoteEnv": "rock.sdk.envs",
    "list_envs": "rock.sdk.envs",
    "make": "rock.sdk.envs",
    "EnvError": "rock.sdk.env_errors",
    "EnvNotFound": "rock.sdk.env_errors",
    "UnknownEnvId": "rock.sdk.env_errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> object:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'rock.sdk' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
