"""A sandbox's socket folder on the host: bind-mounted at /run/rock inside, with its rocklet's folder in it.

The sandbox can write the socket folder (the model proxy's and the package cache's sockets are there), so the
folder is its own small tmpfs (nothing lands on the host's disk), nosuid,nodev,noexec (a setuid file or
device node placed there serves nobody on the host), and owner-only.

The rocklet listens in `rocklet/`, a second tmpfs mounted inside the first (Docker's bind takes both along).
Once the rocklet's socket is there, the worker remounts that tmpfs read-only: no process of the sandbox, root
or not, can then rename, remove or replace the socket (the read-only mount refuses it, and the folder itself
is a mount point, which cannot be renamed), while connecting to it still works.

The rocklet answers only requests that carry the sandbox's token, which the worker derives from a key of its
own (so a restarted worker can still reach the sandboxes it adopts) and hands over in a file the rocklet
removes once read, before the folder is sealed and before any command of the sandbox's runs.
"""

from __future__ import annotations

import ctypes
import hashlib
import hmac
import os
import secrets
import shutil
import stat
from pathlib import Path

SOCKET_DIR_SIZE = "32m"
"""The size of the tmpfs behind a sandbox's socket folder: sockets, its token and its session state files."""
ROCKLET_DIR_SIZE = "1m"
"""The size of the tmpfs of the rocklet's own folder: its socket and, until read, its token."""
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REMOUNT, _MNT_DETACH = 0x1, 0x2, 0x4, 0x8, 0x20, 0x2
"""mount(2) and umount2(2) flags from <sys/mount.h>."""


SOCKET_MOUNT = "/run/rock"
"""Where the socket folder appears inside the sandbox."""
ROCKLET_DIR = "rocklet"
"""The rocklet's own folder inside the socket folder, sealed read-only once its socket is there."""
ROCKLET_SOCKET = f"{ROCKLET_DIR}/rocklet.sock"
TOKEN_FILE = f"{ROCKLET_DIR}/.token"
"""Where the worker puts the rocklet's token (the rocklet removes it once read)."""
ROCKLET_STATE = "rocklet-state"
"""The rocklet's session state, in the writable socket folder (the rocklet's own folder is sealed)."""


def rocklet_command() -> list[str]:
    """The container's command: the rocklet on its socket in its own folder, its token there, its sessions'
    state in the writable socket folder."""
    from rock.runtime import rocklet_container_command

    command = rocklet_container_command(
        socket_path=f"{SOCKET_MOUNT}/{ROCKLET_SOCKET}", token_file=f"{SOCKET_MOUNT}/{TOKEN_FILE}"
    )
    return [*command, "--state-dir", f"{SOCKET_MOUNT}/{ROCKLET_STATE}"]


def make_host_dir(path: Path, user: str) -> None:
    """The per-sandbox socket folder: owner-only, the sandbox's user (`uid:gid`) its owner.

    As root, the worker mounts a small tmpfs there with nosuid,nodev,noexec, which the container's bind
    mount inherits: nothing the sandbox writes there lands on the host's disk, nor can a setuid file or a
    device node placed there serve anyone on the host. A worker that is not root can do neither, so it can
    only run sandboxes as its own uid, in a plain owner-only folder.
    """
    uid, _, gid = user.partition(":")
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if os.geteuid() != 0:
        if int(uid) != os.geteuid():
            raise PermissionError(
                f"a worker that is not root cannot give sandbox user {uid} a socket folder only it can "
                f"reach; run the worker as root, or create the sandbox with user='{os.geteuid()}'"
            )
        path.chmod(0o700)
        (path / ROCKLET_DIR).mkdir(mode=0o700, exist_ok=True)
        return
    owner = f"mode=0700,uid={uid},gid={gid or uid}"
    _mount_tmpfs(path, f"size={SOCKET_DIR_SIZE},{owner}")
    (path / ROCKLET_DIR).mkdir(mode=0o700)
    _mount_tmpfs(path / ROCKLET_DIR, f"size={ROCKLET_DIR_SIZE},{owner}")


def seal_rocklet_dir(host_dir: Path) -> None:
    """Make the rocklet's folder read-only for everyone, the sandbox included (call once its socket is there).

    As root: a remount of its tmpfs, so the container's view of it is read-only too. A worker that is not
    root runs its sandboxes as its own uid and can only take the folder's write permission away, which that
    uid could give back; there, the peer check of every connection (rock.rocklet.client) is what holds.
    """
    folder = host_dir / ROCKLET_DIR
    if os.geteuid() != 0:
        folder.chmod(0o500)
        return
    flags = _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    if _libc().mount(b"rock-rocklet", os.fsencode(folder), b"tmpfs", flags, None) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"sealing the rocklet's folder {folder} read-only failed: {os.strerror(error)}")


def _libc() -> ctypes.CDLL:
    # The syscalls themselves: a `mount` process per sandbox cost ~13 ms of its start (more on a busy host).
    return ctypes.CDLL(None, use_errno=True)


def _mount_tmpfs(path: Path, options: str) -> None:
    flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    if _libc().mount(b"rock-sandbox", os.fsencode(path), b"tmpfs", flags, options.encode()) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"mounting a tmpfs at {path} failed: {os.strerror(error)}")


def _unmount(path: str) -> None:
    """Detach the mount at `path` (lazily: a process still using it keeps it until it lets go)."""
    _libc().umount2(os.fsencode(path), _MNT_DETACH)


def write_token(host_dir: Path, token: str, user: str) -> None:
    """The rocklet's token, for it to read (and remove) at start; readable by the sandbox's user only."""
    uid, _, gid = user.partition(":")
    fd = os.open(host_dir / TOKEN_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, token.encode())
        if os.geteuid() == 0:
            os.fchown(fd, int(uid), int(gid or uid))
    finally:
        os.close(fd)


def release_host_dir(host_dir: Path) -> None:
    """Unmount (if mounted) and remove a socket folder."""
    if os.path.ismount(host_dir / ROCKLET_DIR):
        _unmount(str(host_dir / ROCKLET_DIR))
    if os.path.ismount(host_dir):
        _unmount(str(host_dir))
    shutil.rmtree(host_dir, ignore_errors=True)


def release_mounts_under(folder: Path) -> None:
    """Unmount every socket folder still mounted under `folder`: a stopped worker leaves its sandboxes' (for
    the next worker with its id to adopt), so whoever removes its state folder for good unmounts them."""
    prefix = f"{folder.resolve()}/"
    with open("/proc/self/mounts") as mounts:
        points = [fields[1] for fields in (line.split() for line in mounts) if fields[1].startswith(prefix)]
    for point in sorted(points, reverse=True):
        _unmount(point)


def rocklet_key(state_dir: Path) -> bytes:
    """The worker's key for rocklet tokens (STATE_DIR/rocklet.key, owner-only), made on first use."""
    path = state_dir / "rocklet.key"
    state_dir.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return path.read_bytes()
    key = secrets.token_bytes(32)
    try:
        os.write(fd, key)
    finally:
        os.close(fd)
    return key


def rocklet_token(key: bytes, sandbox_id: str) -> str:
    return hmac.new(key, sandbox_id.encode(), hashlib.sha256).hexdigest()


def socket_problem(socket_path: str) -> str | None:
    """What replaced the rocklet's socket (a symlink, a file), or None if a socket or nothing is there (a
    rocklet removes its socket when it exits: a stopped sandbox, which the container's state tells)."""
    try:
        kind = stat.S_IFMT(os.lstat(socket_path).st_mode)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"the rocklet's socket {socket_path} cannot be examined: {exc.strerror}"
    if kind == stat.S_IFSOCK:
        return None
    found = "a symlink" if kind == stat.S_IFLNK else "something that is not a socket"
    return (
        f"the sandbox replaced its rocklet's socket {socket_path} with {found}; the worker no longer talks "
        "to it: delete the sandbox and create a new one"
    )


def replaced_sockets(sockets: dict[str, str]) -> dict[str, str]:
    """{sandbox id: what replaced its socket} among `sockets` ({sandbox id: socket path})."""
    found = {sandbox_id: socket_problem(path) for sandbox_id, path in sockets.items()}
    return {sandbox_id: problem for sandbox_id, problem in found.items() if problem is not None}
