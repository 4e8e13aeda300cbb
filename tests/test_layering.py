"""The package rooms of DESIGN.md, checked on the source tree: what loads without torch, who imports whom."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Everything an agent host, the proxy or a sandbox client loads; none of it may pull in torch.
TORCH_FREE = (
    "rock.proxy",
    "rock.proxy.types",
    "rock.proxy.client",
    "rock.proxy.train",
    "rock.proxy.app",
    "rock.sdk",
    "rock.sdk.sandbox",
    "roll.types",
)


def test_proxy_sdk_and_training_types_load_without_torch() -> None:
    code = (
        f"import importlib, sys\nfor m in {TORCH_FREE!r}: importlib.import_module(m)\n"
        "loaded = sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))\n"
        "assert not loaded, loaded[:5]\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
