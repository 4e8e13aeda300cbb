"""A hard disk limit where Docker has none (overlay2 on anything but xfs with pquota): each sandbox's writable
layer lives on a filesystem of its own, the size of its `disk`.

Between creating and starting a container, the worker makes a sparse file of the sandbox's size, formats it
ext4 with the container's overlay2 layer folder (`diff`, `work`, `link`, `lower`) as its content and mounts
it, through a loop device, on that folder: Docker's overlay then writes the container's upper layer (and its
work folder, which must share the upper's mount) there. A write past the size fails with ENOSPC at once,
however fast (`fallocate -l 3G` included), and files deleted but held open stay inside it. On removal the
mount is detached (lazily: a running container keeps it until it exits) and the file deleted.

The file is sized `disk` plus ext4's own metadata (inode tables: 1/64 of the size, plus a few MiB), so the
sandbox can write about `disk`; what the host gives up is at most that file. Needs root, `mkfs.ext4`
(e2fsprogs 1.43 or later, for `-d`) and loop devices; without them the worker falls back to measuring
(rock.worker.disk).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
from pathlib import Path

log = logging.getLogger("rock.worker")
METADATA_SHARE = 64
"""ext4 spends 256 bytes of inode table per 16 KiB of space (its default inode ratio): 1/64."""
METADATA_FIXED = 4 * 2**20
"""Superblocks, group descriptors and the root folder of a small filesystem."""
TOOLS = ("mkfs.ext4", "mount", "umount", "losetup")
MKFS_OPTIONS = ("-q", "-F", "-O", "^has_journal", "-m", "0", "-E", "lazy_itable_init=1,nodiscard")


class ScratchError(RuntimeError):
    pass


def image_size(disk: int) -> int:
    """Bytes of the file holding a sandbox's filesystem: its disk limit plus ext4's metadata."""
    return disk + disk // METADATA_SHARE + METADATA_FIXED


class LoopScratch:
    """The per-sandbox filesystems of one worker, as files in `folder`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def usable(self) -> str | None:
        """Why this host cannot give sandboxes filesystems of their own, or None when it can."""
        if os.geteuid() != 0:
            return "the worker does not run as root (mounting needs it)"
        missing = [tool for tool in TOOLS if shutil.which(tool) is None]
        if missing:
            return f"{', '.join(missing)} not installed (e2fsprogs, mount)"
        probe = subprocess.run(["losetup", "-f"], capture_output=True, text=True)
        if probe.returncode != 0:
            return f"no free loop device ({probe.stderr.strip() or 'losetup -f failed'})"
        return None

    def attach(self, sandbox_id: str, layer: Path, disk: int) -> None:
        """Put the container's layer folder `layer` on a new filesystem of `disk` usable bytes."""
        self.folder.mkdir(parents=True, exist_ok=True)
        image = self.folder / f"{sandbox_id}.img"
        with open(image, "wb") as sparse:
            sparse.truncate(image_size(disk))
        (self.folder / f"{sandbox_id}.layer").write_text(str(layer))
        try:
            # No journal (nothing here must survive a crash), no reserved blocks; inode tables are left
            # uninitialised, as the fresh file reads as zeros (mounted with noinit_itable). `-d` fills the
            # new filesystem with the layer folder's entries, so one mount is all that follows.
            _run(["mkfs.ext4", *MKFS_OPTIONS, "-d", str(layer), str(image)])
            _mount(image, layer)
        except BaseException:
            self.detach(sandbox_id)
            raise

    def detach(self, sandbox_id: str) -> None:
        """Unmount the sandbox's filesystem (if mounted) and delete its file; a no-op for other sandboxes."""
        record = self.folder / f"{sandbox_id}.layer"
        with contextlib.suppress(FileNotFoundError):
            layer = record.read_text()
            if os.path.ismount(layer):
                _run(["umount", "-l", layer])
        (self.folder / f"{sandbox_id}.img").unlink(missing_ok=True)
        record.unlink(missing_ok=True)

    def sandboxes(self) -> list[str]:
        """Ids of the sandboxes that have a filesystem here (a restarted worker releases the ones it lost)."""
        if not self.folder.is_dir():
            return []
        return sorted(path.stem for path in self.folder.glob("*.img"))


def _mount(image: Path, where: Path) -> None:
    _run(["mount", "-o", "loop,noinit_itable", str(image), str(where)])


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise ScratchError(f"`{' '.join(command)}` failed: {(done.stderr or done.stdout).strip()}")
