"""The ROCK SDK: `Sandbox`, `AsyncSandbox`, their wire types and typed errors."""

from rock.sdk.errors import CapacityExceeded, CommandTimeout, RockError, SandboxFailed, SandboxNotFound
from rock.sdk.sandbox import AsyncSandbox, Sandbox
from rock.sdk.types import Observation, SandboxInfo, SandboxSpec, SandboxState

__all__ = [
    "AsyncSandbox",
    "CapacityExceeded",
    "CommandTimeout",
    "Observation",
    "RockError",
    "Sandbox",
    "SandboxFailed",
    "SandboxInfo",
    "SandboxNotFound",
    "SandboxSpec",
    "SandboxState",
]
