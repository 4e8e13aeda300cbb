"""The alias table: public image names -> local images, so `FROM python:3.11-slim` builds with no registry.

Defaults map every Python 3 image to `ale/python:3.11` (Debian bookworm's python3), Debian and **Ubuntu** to
`ale/debian:bookworm` (Ubuntu is not built here: tasks written for Ubuntu get Debian bookworm, which runs
almost every apt-based recipe), and busybox to `ale/busybox:latest`. Override or extend the table in
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
