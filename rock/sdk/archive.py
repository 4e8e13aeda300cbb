"""Tar archives for upload and download (the rocklet moves folders as tar)."""

from __future__ import annotations

import contextlib
import io
import tarfile
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import IO

SPOOL = 8 * 1024 * 1024
"""Bytes of an archive kept in memory; a larger one goes to a temporary file."""
PIECE = 1024 * 1024


@contextlib.contextmanager
def pack(src: str | Path) -> Iterator[IO[bytes]]:
    """A tar of `src` (a file or a folder) whose single top entry is named like `src`, in a rewound
    temporary file (in memory up to SPOOL bytes, on disk beyond) to send in pieces."""
    src = Path(src)
    if not src.exists():
        raise FileNotFoundError(f"{src} does not exist; upload needs a local file or folder")
    with tempfile.SpooledTemporaryFile(max_size=SPOOL) as spool:
        with tarfile.open(fileobj=spool, mode="w") as tar:
            tar.add(src, arcname=src.name)
        spool.seek(0)
        yield spool  # type: ignore[misc]


def pieces(file: IO[bytes]) -> Iterator[bytes]:
    while piece := file.read(PIECE):
        yield piece


async def apieces(file: IO[bytes]) -> AsyncIterator[bytes]:
    """`pieces` for an async client (reads of a local temporary file, one piece at a time)."""
    while piece := file.read(PIECE):
        yield piece


def unpack(data: bytes, dest: str | Path) -> Path:
    """Extract a downloaded tar under `dest` (refusing absolute paths and links out of it)."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        names = tar.getnames()
        tar.extractall(dest, filter="data")
    top = names[0].split("/")[0] if names else ""
    return dest / top
