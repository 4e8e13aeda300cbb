"""Files inside the sandbox: read, write, and tar archives in both directions."""

import os

from rock.rocklet.errors import RemoteFileError, RemoteFileNotFound


def read_file(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        raise RemoteFileNotFound(f"{path} does not exist inside the sandbox") from None
    except OSError as exc:
        raise RemoteFileError(f"cannot read {path}: {exc.strerror}") from None


def write_file(path: str, data: bytes, mode: int | None) -> None:
    try:
        parent = os.path.dirname(path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(data)
        if mode is not None:
            os.chmod(path, mode)
    except OSError as exc:
        raise RemoteFileError(f"cannot write {path}: {exc.strerror}") from None


def unpack(tar_bytes: bytes, dest: str) -> None:
    """Extract a tar archive under `dest`; members that would land outside it are refused."""
    import io
    import tarfile

    try:
        os.makedirs(dest, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as archive:
            archive.extractall(dest, filter="data")
    except tarfile.TarError as exc:
        raise RemoteFileError(f"cannot unpack the upload into {dest}: {exc}") from None
    except OSError as exc:
        raise RemoteFileError(f"cannot unpack the upload into {dest}: {exc.strerror}") from None


def pack(path: str) -> bytes:
    """A tar archive of `path` (a file or a folder), named by its last component, as `docker cp` does."""
    import io
    import tarfile

    if not os.path.lexists(path):
        raise RemoteFileNotFound(f"{path} does not exist inside the sandbox")
    buffer = io.BytesIO()
    try:
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            archive.add(path, arcname=os.path.basename(os.path.normpath(path)) or ".")
    except OSError as exc:
        raise RemoteFileError(f"cannot archive {path}: {exc.strerror}") from None
    return buffer.getvalue()
