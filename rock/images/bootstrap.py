"""`ensure_base_images()`: the local base images, built without any registry.

Steps: debootstrap --variant=minbase bookworm (debootstrap's default mirror) into a folder, tar it into
`$ALE_HOME/images/` (kept, so a rebuild skips the download), `docker import` it as ale/debian-rootfs:bookworm,
then build docker/debian, docker/python and docker/busybox on top. Each image carries a label with the hash of
its recipe and parent; when all labels match, nothing is done.
"""

import fcntl
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from rock.images.aliases import BUSYBOX, DEBIAN, PYTHON
from rock.images.build import context_hash, docker_build, docker_client, image_exists
from rock.images.errors import BootstrapError, ImageBuildError, ImageError
from rock.runtime.home import ale_home

ROOTFS_IMAGE = "ale/debian-rootfs:bookworm"
RECIPE_LABEL = "ale.recipe"
SUITE = "bookworm"
DOCKER_DIR = Path(__file__).resolve().parents[2] / "docker"
BUSYBOX_BINARY = Path("/bin/busybox")


class Reporter(Protocol):
    def step(self, name: str) -> None: ...

    def line(self, text: str) -> None: ...

    def done(self, name: str, detail: str) -> None: ...


class SilentReporter:
    def step(self, name: str) -> None:
        pass

    def line(self, text: str) -> None:
        pass

    def done(self, name: str, detail: str) -> None:
        pass


def ensure_base_images(reporter: Reporter | None = None, force: bool = False) -> dict[str, str]:
    """Build whatever base image is missing or outdated; returns {image name: image id}.

    Concurrent callers (set-up and a test run, say) wait for each other instead of building twice.
    """
    report = reporter or SilentReporter()
    with open(_images_dir() / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _ensure(report, force)


def _ensure(report: Reporter, force: bool) -> dict[str, str]:
    report.step("Docker engine")
    try:
        client = docker_client()
    except ImageError as exc:
        raise BootstrapError(
            "Docker engine", str(exc), "start dockerd (./scripts/setup.sh does it)"
        ) from None
    report.done("Docker engine", "answers")

    if force or not image_exists(client, ROOTFS_IMAGE):
        tarball = _rootfs_tarball(report, force)
        _import_rootfs(client, tarball, report)
    else:
        report.done(f"{ROOTFS_IMAGE}", "present")

    ids = {}
    for name, folder, parent in ((DEBIAN, "debian", ROOTFS_IMAGE), (PYTHON, "python", DEBIAN)):
        ids[name] = _build_recipe(
            client, name, DOCKER_DIR / folder, client.images.get(parent).id, report, force
        )
    ids[BUSYBOX] = _build_busybox(client, report, force)
    return ids


def _images_dir() -> Path:
    folder = ale_home() / "images"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _rootfs_tarball(report: Reporter, force: bool) -> Path:
    step = f"Debian {SUITE} rootfs (debootstrap --variant=minbase)"
    tarball = _images_dir() / f"debian-{SUITE}-minbase.tar"
    if tarball.exists() and not force:
        report.done(step, f"cached at {tarball}")
        return tarball
    report.step(step)
    if shutil.which("debootstrap") is None:
        raise BootstrapError(step, "debootstrap is not installed", "apt-get install -y debootstrap")
    root = _root_prefix(step)
    target = _images_dir() / "rootfs.partial"
    _remove_tree(target, root)
    log_path = _images_dir() / "debootstrap.log"
    tail: list[str] = []
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [*root, "debootstrap", "--variant=minbase", SUITE, str(target)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            tail = [*tail[-19:], line.rstrip()]
            report.line(line.rstrip())
        code = proc.wait()
    if code != 0:
        _remove_tree(target, root)
        raise BootstrapError(
            step,
            f"debootstrap exited with status {code}:\n" + "\n".join(tail),
            f"check that this machine reaches the Debian mirror, that {_images_dir()} has ~500 MB free on a "
            f"filesystem that allows devices and executables; full log: {log_path}",
        )
    report.line("packing the rootfs into a tarball")
    partial = tarball.with_suffix(".tar.partial")
    result = subprocess.run(
        [*root, "tar", "-C", str(target), "--numeric-owner", "-cf", str(partial), "."],
        capture_output=True,
        text=True,
    )
    _remove_tree(target, root)
    if result.returncode != 0:
        partial.unlink(missing_ok=True)
        raise BootstrapError(
            step, f"tar failed: {result.stderr.strip()}", "check free disk space under .ale/"
        )
    partial.rename(tarball)
    report.done(step, f"{tarball.stat().st_size // 2**20} MB at {tarball}")
    return tarball


def _root_prefix(step: str) -> list[str]:
    """debootstrap needs root: nothing to add as root, `sudo -n` where it needs no password."""
    if os.geteuid() == 0:
        return []
    if shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0:
        return ["sudo", "-n"]
    raise BootstrapError(
        step,
        "debootstrap needs root, and sudo asks for a password",
        "run `sudo .venv/bin/rock image bootstrap`",
    )


def _remove_tree(path: Path, root: list[str]) -> None:
    """Remove a debootstrap target, unmounting first whatever an interrupted run left mounted inside it."""
    if not path.exists():
        return
    prefix = str(path.resolve()) + "/"
    with open("/proc/mounts") as mounts:
        inside = [line.split()[1] for line in mounts if line.split()[1].startswith(prefix)]
    for mount_point in sorted(inside, reverse=True):
        subprocess.run([*root, "umount", "-l", mount_point], capture_output=True)
    subprocess.run([*root, "rm", "-rf", "--one-file-system", str(path)], capture_output=True)


def _import_rootfs(client: Any, tarball: Path, report: Reporter) -> None:
    step = f"docker import {ROOTFS_IMAGE}"
    report.step(step)
    repository, tag = ROOTFS_IMAGE.split(":")
    try:
        client.api.import_image(
            src=str(tarball), repository=repository, tag=tag, changes=['CMD ["/bin/bash"]']
        )
    except Exception as exc:
        raise BootstrapError(
            step, str(exc), f"the cached tarball may be damaged: delete {tarball} and run bootstrap again"
        ) from None
    if not image_exists(client, ROOTFS_IMAGE):
        raise BootstrapError(step, "the import left no image", f"delete {tarball} and run bootstrap again")
    report.done(step, "imported")


def _build_recipe(
    client: Any,
    name: str,
    context: Path,
    parent_id: str,
    report: Reporter,
    force: bool,
    prepare: Callable[[Path], None] | None = None,
) -> str:
    step = name
    with tempfile.TemporaryDirectory(prefix="ale-image-") as scratch:
        build_dir = Path(scratch)
        shutil.copytree(context, build_dir, dirs_exist_ok=True)
        if prepare:
            prepare(build_dir)
        dockerfile = build_dir / "Dockerfile"
        recipe = context_hash(build_dir, dockerfile.read_text(), [parent_id])
        if (
            not force
            and image_exists(client, name)
            and client.images.get(name).labels.get(RECIPE_LABEL) == recipe
        ):
            report.done(step, "up to date")
            return str(client.images.get(name).id)
        report.step(step)
        try:
            docker_build(client, build_dir, dockerfile.read_text(), name, {RECIPE_LABEL: recipe}, report.line)
        except ImageBuildError as exc:
            raise BootstrapError(
                step,
                str(exc),
                f"fix {context / 'Dockerfile'} or the network to the Debian mirror, then run bootstrap again",
            ) from None
    report.done(step, "built")
    return str(client.images.get(name).id)


def _build_busybox(client: Any, report: Reporter, force: bool) -> str:
    step = BUSYBOX
    check = subprocess.run(["ldd", str(BUSYBOX_BINARY)], capture_output=True, text=True)
    if not BUSYBOX_BINARY.exists() or check.returncode == 0:
        raise BootstrapError(
            step,
            f"{BUSYBOX_BINARY} is missing or not statically linked",
            "apt-get install -y busybox-static",
        )

    def add_binary(build_dir: Path) -> None:
        shutil.copy2(BUSYBOX_BINARY, build_dir / "busybox")

    return _build_recipe(client, BUSYBOX, DOCKER_DIR / "busybox", "scratch", report, force, add_binary)
