"""Build a Dockerfile through the alias table, tagged by a hash of its content so a repeated build is free."""

from __future__ import annotations

import collections
import contextlib
import hashlib
import json
import os
import re
import secrets
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import requests

from rock.images.aliases import BASE_IMAGES, ImageAliases, aliases_file, load_aliases
from rock.images.errors import ImageBuildError, ImageError, UnknownImage

if TYPE_CHECKING:
    from rock.sdk.types import SandboxSpec

CONTEXT_LABEL = "ale.context-hash"
LOG_TAIL_LINES = 40
FROM_LINE = re.compile(r"^(\s*FROM\s+)((?:--\S+\s+)*)(\S+)(\s+AS\s+(\S+))?(.*)$", re.IGNORECASE)
COPY_FROM = re.compile(r"(--from=)(\S+)", re.IGNORECASE)
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
SANDBOX_BUILD_TIMEOUT = 600.0
"""Seconds a build made for a sandbox (its `build_context`) may run; the admin waits that long plus the
sandbox's start_timeout for the create."""
CPU_PERIOD = 100_000

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


def base_names(text: str) -> list[str]:
    """The images a Dockerfile builds on (FROM and COPY --from, not its own stages), in order, once each."""
    names: list[str] = []
    rewrite_dockerfile(text, lambda name: names.append(name) or name)  # type: ignore[func-returns-value]
    return list(dict.fromkeys(names))


def workdir_of(client: Any, image: str) -> str:
    """The image's WORKDIR, `/` when it sets none."""
    return client.images.get(image).attrs["Config"].get("WorkingDir") or "/"


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


@dataclass(frozen=True)
class BuildLimits:
    """What a build made for a sandbox may use: no network unless the sandbox has the full network, the
    sandbox's memory and CPUs for each RUN step, and a deadline after which the build is cut off."""

    network: str
    memory: int
    cpus: float
    timeout: float = SANDBOX_BUILD_TIMEOUT

    @classmethod
    def of(cls, spec: SandboxSpec) -> BuildLimits:
        # An egress allowlist cannot be enforced on a build's RUN steps (no firewall in their namespace),
        # so only a bridge sandbox without one builds with a network.
        network = "bridge" if spec.network == "bridge" and not spec.egress else "none"
        return cls(network=network, memory=spec.memory_bytes, cpus=spec.cpus)

    def params(self) -> dict[str, str]:
        """The Docker build API's query parameters for these limits (memory without swap, a CFS quota)."""
        return {
            "networkmode": self.network,
            "memory": str(self.memory),
            "memswap": str(self.memory),
            "cpuperiod": str(CPU_PERIOD),
            "cpuquota": str(max(int(self.cpus * CPU_PERIOD), 1000)),
        }


def build_image(
    context_dir: str | Path,
    tag: str | None = None,
    dockerfile: str = "Dockerfile",
    on_line: LineSink | None = None,
    aliases: ImageAliases | None = None,
    package_cache: PackageCacheArgs | None = None,
    limits: BuildLimits | None = None,
    repository: str | None = None,
) -> str:
    """Build `context_dir`'s Dockerfile with its FROM lines resolved through the alias table; returns the tag.

    Without `tag` the image is named `<repository>:<content hash>` (`repository` defaults to
    `ale/build-<folder>`); an image already built from the
    same content (and base images) is returned without building. With `package_cache`, `pip`, `uv` and
    `apt-get` steps of the build fetch through the fleet's cache (see `PackageCacheArgs`). With `limits`
    (a build for a sandbox), the build gets the sandbox's network, memory and CPUs and a deadline.
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
    tag = tag or f"{repository or 'ale/build-' + _slug(context.name)}:{digest[:12]}"
    if image_exists(client, tag) and client.images.get(tag).labels.get(CONTEXT_LABEL) == digest:
        return tag
    params = {"buildargs": json.dumps(package_cache.args), "networkmode": "host"} if package_cache else {}
    params |= limits.params() if limits else {}
    timeout = limits.timeout if limits else None
    docker_build(client, context, text, tag, {CONTEXT_LABEL: digest}, on_line, params, timeout)
    return tag


def docker_build(
    client: Any,
    context: Path,
    dockerfile_text: str,
    tag: str,
    labels: dict[str, str],
    on_line: LineSink | None,
    params: dict[str, str] | None = None,
    timeout: float | None = None,
) -> None:
    """Run `docker build` (the engine's build API, `params` added to its query), streaming its lines to
    `on_line`; ImageBuildError with the log tail on failure, or once `timeout` seconds have passed (the
    connection is then cut, which makes the engine stop the build and its RUN step's container)."""
    tail: collections.deque[str] = collections.deque(maxlen=LOG_TAIL_LINES)
    response = _start_build(client, context, dockerfile_text, tag, labels, params or {}, timeout)
    cut = threading.Event()
    deadline = None if timeout is None else threading.Timer(timeout, _cut, (response, cut))
    try:
        if deadline is not None:
            deadline.start()
        for chunk in _json_lines(response):
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
        if cut.is_set():  # the stream may also just end once its connection is shut
            raise requests.ConnectionError("the build's connection was shut at its deadline")
    except requests.RequestException as exc:
        if cut.is_set():
            raise ImageBuildError(
                f"building {tag} from {context} ran past its limit of {timeout:g} s and was stopped; make "
                "its RUN steps faster (or build the image ahead with `rock image build`)",
                "\n".join(tail),
            ) from None
        raise ImageBuildError(
            f"the build of {tag} from {context} broke off: {exc}", "\n".join(tail)
        ) from None
    finally:
        if deadline is not None:
            deadline.cancel()
        response.close()


def _start_build(
    client: Any,
    context: Path,
    dockerfile_text: str,
    tag: str,
    labels: dict[str, str],
    params: dict[str, str],
    timeout: float | None,
) -> requests.Response:
    """POST the context (with the rewritten Dockerfile added under a name of its own) to the build API."""
    from docker.utils import tar

    name = f".ale-dockerfile-{secrets.token_hex(6)}"
    archive = tar(str(context), exclude=_dockerignore(context), dockerfile=(name, dockerfile_text))
    query = {"t": tag, "dockerfile": name, "labels": json.dumps(labels), "rm": "1", "forcerm": "1"}
    api = client.api
    try:
        response = api.post(
            f"{api.base_url}/v{api.api_version}/build",
            data=archive,
            params=query | params,
            headers={"Content-Type": "application/tar"},
            stream=True,
            # A read waits at most this long too: a RUN step silent past the deadline ends by then.
            timeout=timeout,
        )
    except requests.RequestException as exc:
        raise ImageBuildError(f"Docker did not take the build of {tag} from {context}: {exc}") from None
    finally:
        archive.close()
    if response.status_code >= 400:
        message = response.text.strip()
        response.close()
        raise ImageBuildError(f"Docker refused to build {tag} from {context}: {message}")
    return response


def _dockerignore(context: Path) -> list[str] | None:
    path = context / ".dockerignore"
    if not path.is_file():
        return None
    lines = (line.strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def _json_lines(response: requests.Response) -> Iterator[dict[str, Any]]:
    for line in response.iter_lines():
        if line.strip():
            yield json.loads(line)


def _cut(response: requests.Response, cut: threading.Event) -> None:
    """Shut the build's connection down under the thread reading it (a close alone would not wake a read
    that waits on a silent RUN step); the engine cancels a build whose client has gone."""
    cut.set()
    connection = getattr(response.raw, "connection", None)
    sock = getattr(connection, "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
