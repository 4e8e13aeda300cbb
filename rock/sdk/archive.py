"""Tar archives for upload and download (the rocklet moves folders as tar)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path


def pack(src: str | Path) -> bytes:
    """A tar of `src` (a file or a folder) whose single top entry is named like `src`."""
    src = Path(src)
    if not src.exists():
        raise FileNotFoundError(f"{src} does not exist; upload needs a local file or folder")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(src, arcname=src.name)
    return buffer.getvalue()


def unpack(data: bytes, dest: str | Path) -> Path:
    """Extract a downloaded tar under `dest` (refusing absolute paths and links out of it)."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        names = tar.getnames()
        tar.extractall(dest, filter="data")
    top = names[0].split("/")[0] if names else ""
    return dest / top
