"""Build a Dockerfile through the alias table, tagged by a hash of its content so a repeated build is free."""

import collections
import hashlib
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rock.images.aliases import BASE_IMAGES, ImageAliases, aliases_file, load_aliases
from rock.images.errors import ImageBuildError, ImageError, UnknownImage

CONTEXT_LABEL = "ale.context-hash"
LOG_TAIL_LINES = 40
FROM_LINE = re.compile(r"^(\s*FROM\s+)((?:--\S+\s+)*)(\S+)(\s+AS\s+(\S+))?(.*)$", re.IGNORECASE)
COPY_FROM = re.compile(r"(--from=)(\S+)", re.IGNORECASE)
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

LineSink = Callable[[str], None]


def docker_client() -> Any:
    import docker
    from docker.errors import DockerException

    try:
        client = docker.from_env(timeout=900)
        client.ping()
    except DockerException as exc:
        raise ImageError(
            f"cannot reach the Docker engine ({exc}); start it (./scripts/setup.sh does) and try again"
        ) from None
    return client


def image_exists(client: Any, name: str) -> bool:
    from docker.errors import ImageNotFound

    try:
        client.images.get(name)
    except ImageNotFound:
        return False
    return True


def resolve_image(name: str, aliases: ImageAliases | None = None, client: Any = None) -> str:
    """The local image to use for `name`: its alias, or `name` itself when it is present locally."""
    target = (aliases or load_aliases()).lookup(name) or name
    client = client or docker_client()
    if image_exists(client, target):
        return target
    if target in BASE_IMAGES:
        raise UnknownImage(f"{name!r} maps to {target}, which is not built yet: run `rock image bootstrap`")
    raise UnknownImage(
        f"image {name!r} is not in the alias table and not present locally (registries are not reachable "
        f"here): build it with `rock image build DIR`, or map it to a local image in {aliases_file()}"
    )


def rewrite_dockerfile(text: str, resolve: Callable[[str], str]) -> str:
    """Replace every base image (FROM, COPY --from) by its local equivalent; build stages are kept."""
    stages: set[str] = set()
    lines = []
    for line in text.splitlines():
        match = FROM_LINE.match(line)
        if match:
            image = match.group(3)
            if image.lower() != "scratch" and image.lower() not in stages and "$" not in image:
                image = resolve(image)
            if match.group(5):
                stages.add(match.group(5).lower())
            line = f"{match.group(1)}{match.group(2)}{image}{match.group(4) or ''}{match.group(6)}"
        elif line.lstrip().upper().startswith(("COPY", "RUN")) and "--from=" in line.lower():

            def swap(found: re.Match[str]) -> str:
                source = found.group(2)
                if source.lower() in stages or source.isdigit() or "$" in source:
                    return found.group(0)
                return found.group(1) + resolve(source)

            line = COPY_FROM.sub(swap, line)
        lines.append(line)
    return "\n".join(lines) + "\n"


def context_hash(context: Path, dockerfile_text: str, extra: list[str]) -> str:
    digest = hashlib.sha256(dockerfile_text.encode())
    for item in extra:
        digest.update(b"\0" + item.encode())
    for root, dirs, names in os.walk(context):
        dirs.sort()
        for name in sorted(names):
            path = Path(root) / name
            relative = path.relative_to(context).as_posix()
            digest.update(b"\0" + relative.encode() + b"\0" + oct(path.lstat().st_mode).encode())
            if path.is_symlink():
                digest.update(os.readlink(path).encode())
            elif path.is_file():
                digest.update(path.read_bytes())
    return digest.hexdigest()


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-.") or "image"


class PackageCacheArgs:
    """A build's way to the package cache on the host's loopback: the build shares the host's network and
    each stage declares build arguments (`ARG`, so nothing stays in the image) that point pip and uv at the
    PyPI cache and apt (through the predefined `http_proxy`) at the apt cache."""

    def __init__(self, pypi: str, apt: str | None) -> None:
        index = f"http://{pypi}/root/pypi/+simple/"
        self.args = {"PIP_INDEX_URL": index, "PIP_TRUSTED_HOST": pypi, "UV_DEFAULT_INDEX": index}
        if apt is not None:
            self.args |= {"http_proxy": f"http://{apt}", "no_proxy": "127.0.0.1,localhost"}

    def declare(self, text: str) -> str:
        declared = [f"ARG {name}" for name in self.args]
        lines = []
        for line in text.splitlines():
            lines.append(line)
            if FROM_LINE.match(line):
                lines += declared
        return "\n".join(lines) + "\n"


def build_image(
    context_dir: str | Path,
    tag: str | None = None,
    dockerfile: str = "Dockerfile",
    on_line: LineSink | None = None,
    aliases: ImageAliases | None = None,
    package_cache: PackageCacheArgs | None = None,
) -> str:
    """Build `context_dir`'s Dockerfile with its FROM lines resolved through the alias table; returns the tag.

    Without `tag` the image is named `ale/build-<folder>:<content hash>`; an image already built from the
    same content (and base images) is returned without building. With `package_cache`, `pip`, `uv` and
    `apt-get` steps of the build fetch through the fleet's cache (see `PackageCacheArgs`).
    """
    context = Path(context_dir).resolve()
    source = context / dockerfile
    if not source.is_file():
        raise ImageBuildError(f"no {dockerfile} in {context}: pass the folder that holds the Dockerfile")
    client = docker_client()
    table = aliases or load_aliases()
    used: dict[str, str] = {}

    def resolve(name: str) -> str:
        used[name] = resolve_image(name, table, client)
        return used[name]

    text = rewrite_dockerfile(source.read_text(), resolve)
    if package_cache is not None:
        text = package_cache.declare(text)
    base_ids = sorted(f"{name}={client.images.get(local).id}" for name, local in used.items())
    digest = context_hash(context, text, base_ids)
    tag = tag or f"ale/build-{_slug(context.name)}:{digest[:12]}"
    if image_exists(client, tag) and client.images.get(tag).labels.get(CONTEXT_LABEL) == digest:
        return tag
    with tempfile.TemporaryDirectory(prefix="ale-build-") as scratch:
        rewritten = Path(scratch) / "Dockerfile"
        rewritten.write_text(text)
        docker_build(client, context, rewritten, tag, {CONTEXT_LABEL: digest}, on_line, package_cache)
    return tag


def docker_build(
    client: Any,
    context: Path,
    dockerfile: Path,
    tag: str,
    labels: dict[str, str],
    on_line: LineSink | None,
    package_cache: PackageCacheArgs | None = None,
) -> None:
    """Run `docker build`, streaming its lines to `on_line`; ImageBuildError with the log tail on failure."""
    from docker.errors import APIError

    tail: collections.deque[str] = collections.deque(maxlen=LOG_TAIL_LINES)
    try:
        stream = client.api.build(
            path=str(context),
            dockerfile=str(dockerfile),
            tag=tag,
            labels=labels,
            rm=True,
            forcerm=True,
            pull=False,
            decode=True,
            buildargs=package_cache.args if package_cache else None,
            network_mode="host" if package_cache else None,
        )
        for chunk in stream:
            text = ANSI_ESCAPE.sub("", chunk.get("stream") or chunk.get("status") or "")
            for line in text.splitlines():
                if line.strip():
                    tail.append(line.rstrip())
                    if on_line:
                        on_line(line.rstrip())
            if "error" in chunk:
                message = str(chunk.get("errorDetail", {}).get("message") or chunk["error"]).strip()
                tail.append(message)
                raise ImageBuildError(
                    f"building {tag} from {context} failed: {message}. Fix the Dockerfile step named in the "
                    "log below; note that registries are not reachable (use `RUN apt-get`, or COPY in "
                    "wheels downloaded on the host)",
                    "\n".join(tail),
                )
    except APIError as exc:
        raise ImageBuildError(
            f"Docker refused to build {tag} from {context}: {exc}", "\n".join(tail)
        ) from None
