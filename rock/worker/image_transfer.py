"""Images between workers: which images a worker's Docker holds (reported in its heartbeats), an image's
archive streamed out (`docker save`), and one loaded from a stream (`docker load`). The admin pipes one
worker's save into another's load when a sandbox is placed where its image is missing (rock.admin.images).

Blocking Docker calls: the worker runs them in its thread pool.
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import docker
import docker.errors

CHUNK = 1 << 20


def local_tags(client: docker.DockerClient) -> list[str]:
    """Every `repository:tag` this Docker holds."""
    tags = {tag for image in client.api.images() for tag in image.get("RepoTags") or []}
    return sorted(tags - {"<none>:<none>"})


def save_chunks(client: docker.DockerClient, name: str) -> Iterator[bytes]:
    """The image's `docker save` archive, piece by piece (a sync iterator: Starlette runs it in a thread)."""
    yield from client.api.get_image(name, chunk_size=CHUNK)


async def spool(stream: AsyncIterator[bytes], folder: Path) -> Path:
    """Write an incoming archive to a temporary file under `folder` (images can be larger than memory)."""
    with tempfile.NamedTemporaryFile(dir=folder, prefix="image-", suffix=".tar", delete=False) as out:
        async for piece in stream:
            out.write(piece)
        return Path(out.name)


def load_file(client: docker.DockerClient, archive: Path) -> list[str]:
    """`docker load` of a spooled archive (removed after); returns the tags it loaded."""
    try:
        with archive.open("rb") as data:
            lines = list(client.api.load_image(data))
    finally:
        archive.unlink(missing_ok=True)
    tags = []
    for line in lines:
        if "error" in line:
            raise docker.errors.APIError(line["error"])
        stream = str(line.get("stream", ""))
        if stream.startswith("Loaded image:"):
            tags.append(stream.split(":", 1)[1].strip())
    return tags
