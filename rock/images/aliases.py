"""The alias table: public image names -> local images, so `FROM python:3.11-slim` builds with no registry.

Defaults map every Python 3 image to `ale/python:3.11` (Debian bookworm's python3), Debian and **Ubuntu** to
`ale/debian:bookworm` (Ubuntu is not built here: tasks written for Ubuntu get Debian bookworm, which runs
almost every apt-based recipe), and busybox to `ale/busybox:latest`. Terminal-Bench's own base images
(`ghcr.io/laude-institute/t-bench/python-3-13` and `.../ubuntu-24-04`, which its tasks build `FROM`) map the
same way. Where a local image is not what the name says (another Python, Debian for Ubuntu), `difference`
says how, and rome-bench notes it in the trial. Override or extend the table in
`$ALE_HOME/images.yaml` (`.ale/images.yaml` in a checkout):

    aliases:
      "node:20*": my/node:20
      "ubuntu:*": ale/python:3.11

Keys are exact names or shell-style patterns (`*`, `?`); the first match wins, exact names before patterns,
entries from the file before the defaults.
"""

import fnmatch
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rock.images.errors import ImageConfigError
from rock.runtime.home import ale_home

DEBIAN = "ale/debian:bookworm"
PYTHON = "ale/python:3.11"
BUSYBOX = "ale/busybox:latest"
BASE_IMAGES = (DEBIAN, PYTHON, BUSYBOX)
TBENCH = "ghcr.io/laude-institute/t-bench"

DEFAULT_ALIASES: dict[str, str] = {
    "python:3.11*": PYTHON,
    "python:3*": PYTHON,
    "python:latest": PYTHON,
    "debian:bookworm*": DEBIAN,
    "debian:12*": DEBIAN,
    "debian:stable*": DEBIAN,
    "debian:latest": DEBIAN,
    "ubuntu:*": DEBIAN,
    "busybox:*": BUSYBOX,
    # Terminal-Bench's bases: python:3.13-slim and ubuntu:24.04 with tmux and asciinema for its harness.
    f"{TBENCH}/python-3-*": PYTHON,
    f"{TBENCH}/ubuntu-*": DEBIAN,
}

# Where a default alias is not the image it stands for: what differs, for the trial's notes. Names matching
# no pattern here (python:3.11-slim, debian:bookworm) get exactly what they ask for.
_SAME = ("python:3.11*", "debian:bookworm*", "debian:12*", "debian:stable*", "debian:latest", "busybox:*")
DIFFERENCES: dict[str, str] = {
    "python:*": "Python 3.11 on Debian bookworm (ale/python:3.11), not the Python version it names",
    "ubuntu:*": "Debian bookworm (ale/debian:bookworm), not Ubuntu: Ubuntu-only packages may be absent",
    f"{TBENCH}/python-3-*": (
        "Python 3.11 on Debian bookworm (ale/python:3.11), not Python 3.13; no tmux or asciinema"
    ),
    f"{TBENCH}/ubuntu-*": (
        "Debian bookworm (ale/debian:bookworm), not Ubuntu 24.04: Ubuntu-only packages may be absent; no tmux"
    ),
}


class ImageAliases(BaseModel):
    """Public image name (or pattern) -> local image."""

    model_config = ConfigDict(extra="forbid")

    aliases: dict[str, str] = Field(default_factory=dict, description="entries that come before the defaults")

    def table(self) -> dict[str, str]:
        return {**self.aliases, **{k: v for k, v in DEFAULT_ALIASES.items() if k not in self.aliases}}

    def lookup(self, name: str) -> str | None:
        """The local image for `name`, or None when no entry matches."""
        normalized = normalize(name)
        table = self.table()
        if normalized in table:
            return table[normalized]
        for pattern, target in table.items():
            if fnmatch.fnmatchcase(normalized, pattern):
                return target
        return None


def difference(name: str, aliases: ImageAliases | None = None) -> str | None:
    """How the local image a default alias gives `name` differs from it; None when it is the same image,
    the user's own entry, or no alias."""
    normalized = normalize(name)
    table = aliases or ImageAliases()
    if normalized in table.aliases or any(fnmatch.fnmatchcase(normalized, p) for p in table.aliases):
        return None  # the user's own entry: they chose what it means
    if any(fnmatch.fnmatchcase(normalized, p) for p in _SAME):
        return None
    for pattern, note in DIFFERENCES.items():
        if fnmatch.fnmatchcase(normalized, pattern):
            return f"{name} is built as {note}"
    return None


def normalize(name: str) -> str:
    """`docker.io/library/python` -> `python:latest`; digests and other registries are kept."""
    for prefix in ("docker.io/", "index.docker.io/", "registry-1.docker.io/"):
        if name.startswith(prefix):
            name = name[len(prefix) :]
    if name.startswith("library/"):
        name = name[len("library/") :]
    last = name.rsplit("/", 1)[-1]
    if ":" not in last and "@" not in last:
        name += ":latest"
    return name


def aliases_file() -> Path:
    return ale_home() / "images.yaml"


def load_aliases(path: Path | None = None) -> ImageAliases:
    """The table from `path` (default `$ALE_HOME/images.yaml`) over the defaults; defaults alone if absent."""
    path = path or aliases_file()
    if not path.exists():
        return ImageAliases()
    try:
        data = yaml.safe_load(path.read_text()) or {}
        return ImageAliases.model_validate(data)
    except (yaml.YAMLError, ValidationError) as exc:
        raise ImageConfigError(
            f"{path} is not a valid alias table ({exc}); it must look like:\n"
            'aliases:\n  "python:3.12*": ale/python:3.11'
        ) from None
