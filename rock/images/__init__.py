"""Local images with no registry: the base images (`ensure_base_images`), the alias table (`resolve_image`)
and task builds through it (`build_image`). The CLI is `rock image` (rock/images/cli.py).

Names are loaded on first use, so that `rock --help` does not pay for pydantic and the docker SDK.
"""

import importlib
from typing import Any

_EXPORTS = {
    "BASE_IMAGES": "rock.images.aliases",
    "BUSYBOX": "rock.images.aliases",
    "DEBIAN": "rock.images.aliases",
    "PYTHON": "rock.images.aliases",
    "ImageAliases": "rock.images.aliases",
    "load_aliases": "rock.images.aliases",
    "ensure_base_images": "rock.images.bootstrap",
    "build_image": "rock.images.build",
    "resolve_image": "rock.images.build",
    "BootstrapError": "rock.images.errors",
    "ImageBuildError": "rock.images.errors",
    "ImageConfigError": "rock.images.errors",
    "ImageError": "rock.images.errors",
    "UnknownImage": "rock.images.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'rock.images' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
