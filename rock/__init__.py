"""ROCK: the sandbox fleet (admin, workers, rocklet) and its SDK.

`rock.Sandbox`, `rock.AsyncSandbox`, the typed errors and `rock.make` (GEM environments hosted in sandboxes)
are loaded on first use, so `rock --help` and the
rocklet (which imports this package inside every sandbox) stay light.
"""

_SDK_NAMES = frozenset(
    {
        "AsyncSandbox",
        "CapacityExceeded",
        "CommandTimeout",
        "FailureReason",
        "QuotaExceeded",
        "Observation",
        "make",
        "RockError",
        "Sandbox",
        "SandboxFailed",
        "SandboxInfo",
        "SandboxNotFound",
        "SandboxSpec",
        "SandboxState",
    }
)

__all__ = sorted(_SDK_NAMES)


def __getattr__(name: str) -> object:  # no typing import: the rocklet imports this package at start
    if name in _SDK_NAMES:
        import rock.sdk

        return getattr(rock.sdk, name)
    raise AttributeError(f"module 'rock' has no attribute {name!r}")
