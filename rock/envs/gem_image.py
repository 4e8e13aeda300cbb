"""The build context of the GEM sandbox image: the image's Python with gem-llm, installed from wheels.

Pip cannot reach PyPI inside image builds, so the wheels are built on the host once (`pip wheel`, pinned to
the versions installed here, so GEM in a sandbox behaves exactly as GEM on the host) into
`~/.cache/ale/gem-image-<version>/` (or `$ALE_GEM_IMAGE_CACHE`); the worker builds `FROM python:3.11` with
them and caches the image by the context's hash.
"""

from __future__ import annotations

import fcntl
import importlib.metadata
import shutil
import subprocess
import sys
from pathlib import Path

from rock.sdk.host_python import cache_root, installed_pins

GEM_DISTRIBUTION = "gem-llm"
DOCKERFILE = """FROM python:3.11
COPY wheels /tmp/gem-wheels
RUN pip3 install --no-index --find-links /tmp/gem-wheels --break-system-packages {requirement} \\
    && rm -rf /tmp/gem-wheels && python3 -c "import gem"
"""


class GemImageError(RuntimeError):
    """The GEM image's wheels could not be prepared; the message says what to do."""


def gem_version() -> str:
    try:
        return importlib.metadata.version(GEM_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise GemImageError(
            f"{GEM_DISTRIBUTION} is not installed on this host; `pip install {GEM_DISTRIBUTION}` first "
            "(its wheels are copied into the sandbox image)"
        ) from None


def gem_context_folder() -> Path:
    """Where `gem_build_context` prepares the GEM image's folder: the admin that serves /envs builds from
    it (so it is on that admin's list of build folders)."""
    return cache_root() / f"gem-image-{gem_version()}"


def gem_build_context() -> Path:
    """A folder with the Dockerfile and wheels of the GEM image, prepared once per gem-llm version."""
    version = gem_version()
    folder = gem_context_folder()
    if (folder / "Dockerfile").is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".gem-image-{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (folder / "Dockerfile").is_file():
            return folder
        staging = folder.with_name(folder.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        (staging / "wheels").mkdir(parents=True)
        constraints = staging / "constraints.txt"
        constraints.write_text("\n".join(installed_pins()) + "\n")
        requirement = f"{GEM_DISTRIBUTION}=={version}"
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "-q",
                "-w",
                str(staging / "wheels"),
                "-c",
                str(constraints),
                requirement,
            ],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise GemImageError(
                f"`pip wheel {requirement}` failed (it needs PyPI once, then works offline):\n"
                f"{done.stderr[-2000:]}"
            )
        (staging / "Dockerfile").write_text(DOCKERFILE.format(requirement=requirement))
        staging.rename(folder)
    return folder
