"""Unix sockets the host listens on in folders a sandbox can write (its socket folder).

A `chmod(path)` after `bind(path)` follows whatever is at `path` by then: a sandbox that swaps the new
socket for a symlink to a host file between the two calls gets that file's mode changed (0666 on
/etc/shadow, say). Here the mode is set through a descriptor opened with O_NOFOLLOW on the bound name,
after checking that it is a socket this process owns, so a link put in its place is refused, never followed.
"""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path


class SocketReplaced(OSError):
    """What is at the socket's path is not the socket this process just bound (a link, another file)."""


def bind_unix(path: str | Path, mode: int, group: int | None = None) -> socket.socket:
    """A stream socket bound at `path` with permissions `mode` (and group `group`); the caller listens."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(path))
        set_socket_mode(path, mode, group)
    except OSError:
        sock.close()
        raise
    return sock


def set_socket_mode(path: str | Path, mode: int, group: int | None = None) -> None:
    """chmod (and chgrp) the socket at `path` without following a symlink; SocketReplaced if `path` is not
    a socket owned by this process's user."""
    try:
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW)
    except OSError as exc:
        raise SocketReplaced(exc.errno, f"the socket at {path} is gone: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISSOCK(info.st_mode) or info.st_uid != os.geteuid():
            raise SocketReplaced(
                f"{path} is no longer the socket this process bound (something in its folder replaced it); "
                "its mode was left alone"
            )
        # Through /proc the call reaches exactly the inode the descriptor holds: a socket, checked above.
        os.chmod(f"/proc/self/fd/{fd}", mode)
        if group is not None:
            os.chown(f"/proc/self/fd/{fd}", -1, group)
    finally:
        os.close(fd)
