"""The on-disk cache of builtin model folders: built once, atomically, under a file lock."""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

CACHE_ENV = "ALE_MODEL_CACHE"


def model_cache_dir() -> Path:
    """Where builtin models live: `$ALE_MODEL_CACHE`, else `~/.cache/ale/models`."""
    configured = os.environ.get(CACHE_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "ale" / "models"


def is_model_folder(path: Path) -> bool:
    """A Hugging Face model folder has a config.json and at least one weights file."""
    if not (path / "config.json").is_file():
        return False
    return (
        any(path.glob("*.safetensors"))
        or any(path.glob("*.bin"))
        or any(path.glob("*.safetensors.index.json"))
    )


@contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    with open(lock_path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_cached_folder(name: str, build: Callable[[Path], None]) -> Path:
    """Return `<cache>/<name>`, calling `build(tmp_folder)` first if it does not exist yet.

    The folder is built in a temporary sibling and renamed into place, so a crash never leaves a half-written
    model behind; the lock makes concurrent processes wait for one build instead of repeating it.
    """
    root = model_cache_dir()
    final = root / name
    if is_model_folder(final):
        return final
    root.mkdir(parents=True, exist_ok=True)
    with _exclusive(root / f".{name}.lock"):
        if is_model_folder(final):
            return final
        if final.exists():
            raise RuntimeError(
                f"{final} exists but is not a model folder (no config.json or weights); "
                "delete it and the model will be rebuilt."
            )
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}.partial-", dir=root))
        try:
            build(tmp)
            tmp.chmod(0o755)  # mkdtemp makes it private; the cache is shared like any folder
            os.rename(tmp, final)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return final
