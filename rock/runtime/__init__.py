"""The self-contained Python runtime that starts the rocklet in any Linux image (even one without libc).

`ensure_runtime()` builds, once, a folder holding this host's interpreter, its standard library, every shared
library they load and the dynamic loader, plus the rocklet's code. The worker mounts it read-only at
`RUNTIME_MOUNT`; the container runs `rocklet_container_command()`, which starts the interpreter through the
bundled loader so the image's own libc (if any) never matters.
"""

from rock.runtime.build import ensure_runtime
from rock.runtime.command import (
    ROCKLET_SOCKET,
    RUNTIME_MOUNT,
    rocklet_container_command,
    rocklet_container_env,
)
from rock.runtime.home import ale_home

__all__ = [
    "ROCKLET_SOCKET",
    "RUNTIME_MOUNT",
    "ale_home",
    "ensure_runtime",
    "rocklet_container_command",
    "rocklet_container_env",
]
