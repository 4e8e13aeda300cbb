"""Files inside the sandbox: read, write, and tar archives in both directions.

Writes and uploads come as streams (anything with `read(n)`), so a large one never sits in memory.
"""

import os
import stat

from rock.rocklet.errors import RemoteFileError, RemoteFileNotFound

# Importing typing adds ~4 ms to every sandbox's start; only type checkers need it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import BinaryIO

MAX_READ = 64 * 1024 * 1024
"""Bytes `read_file` answers with at most: they are held in memory on their way out; larger files go by
download."""
PIECE = 1024 * 1024


def read_file(path: str) -> bytes:
    """A regular file's bytes; devices, pipes and folders are refused (`/dev/zero` never ends)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise RemoteFileNotFound(f"{path} does not exist inside the sandbox") from None
    except OSError as exc:
        raise RemoteFileError(f"cannot read {path}: {exc.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise RemoteFileError(
            f"{path} is not a regular file (a device, pipe, socket or folder); read_file reads files "
            "only: use download for a folder, or run a command to read the others"
        )
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(MAX_READ + 1)
    if len(data) > MAX_READ:
        raise RemoteFileError(
            f"{path} is over read_file's limit of {MAX_READ} bytes; fetch it with download (a tar archive)"
        )
    return data


def write_file(path: str, data: "BinaryIO", mode: int | None) -> None:
    try:
        parent = os.path.dirname(path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        with open(path, "wb") as handle:
            while piece := data.read(PIECE):
                handle.write(piece)
        if mode is not None:
            os.chmod(path, mode)
    except OSError as exc:
        raise RemoteFileError(f"cannot write {path}: {exc.strerror}") from None


def unpack(stream: "BinaryIO", dest: str) -> None:
    """Extract a tar archive (read as a stream) under `dest`; members that would land outside it are
    refused."""
    import tarfile

    try:
        os.makedirs(dest, exist_ok=True)
        with tarfile.open(fileobj=stream, mode="r|*") as archive:
            archive.extractall(dest, filter="data")
    except tarfile.TarError as exc:
        raise RemoteFileError(f"cannot unpack the upload into {dest}: {exc}") from None
    except OSError as exc:
        raise RemoteFileError(f"cannot unpack the upload into {dest}: {exc.strerror}") from None


def pack(path: str) -> "Callable[[BinaryIO], None]":
    """What writes a tar archive of `path` (a file or a folder), named by its last component as `docker cp`
    does, into a stream: the archive is never held in memory, whatever its size."""
    import tarfile

    if not os.path.lexists(path):
        raise RemoteFileNotFound(f"{path} does not exist inside the sandbox")
    # Once the archive streams, an error can only break the connection: find what cannot be read first.
    for entry in _entries(path):
        if not os.path.islink(entry) and not os.access(
            entry, os.R_OK | (os.X_OK if os.path.isdir(entry) else 0)
        ):
            raise RemoteFileError(f"cannot archive {path}: {entry} is not readable by the sandbox's user")

    def write(out: "BinaryIO") -> None:
        with tarfile.open(fileobj=out, mode="w|") as archive:
            archive.add(path, arcname=os.path.basename(os.path.normpath(path)) or ".")

    return write


def _entries(path: str) -> "Iterator[str]":
    yield path
    if os.path.isdir(path) and not os.path.islink(path):
        for root, dirs, names in os.walk(path):
            for name in dirs + names:
                yield os.path.join(root, name)
