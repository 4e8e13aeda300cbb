"""`Images` (sync) and `AsyncImages`: images made ready on the fleet, through the admin's HTTP API.

The fleet builds: a client names a folder on the workers' hosts (one of the operator's build roots, `rock
admin serve --build-context-root`) and never needs a Docker of its own.

info = Images(admin_url=url).ensure(build_context="/srv/tasks/t1/environment", repository="rome-bench/t1")
Sandbox(info.tag, admin_url=url)  # commands start in info.workdir only when asked: cwd=info.workdir
"""

from __future__ import annotations

from typing import Literal

import httpx

from rock.sdk import calls
from rock.sdk.types import ImageInfo, ImageRequest

Network = Literal["none", "packages", "bridge"]


def image_request(
    build_context: str | None = None,
    image: str | None = None,
    *,
    dockerfile: str = "Dockerfile",
    repository: str | None = None,
    network: Network = "none",
    cpus: float | None = None,
    memory: str | None = None,
) -> ImageRequest:
    options: dict[str, object] = {"cpus": cpus, "memory": memory}
    return ImageRequest(
        build_context=build_context,
        image=image,
        dockerfile=dockerfile,
        repository=repository,
        network=network,
        **{k: v for k, v in options.items() if v is not None},  # type: ignore[arg-type]
    )


class Images:
    """The fleet's images. `ensure` builds `build_context` (or resolves `image`) on a worker and answers its
    tag, working directory and notes; a build of content built before returns at once."""

    def __init__(self, admin_url: str | None = None, api_key: str | None = None) -> None:
        self.admin_url, self.api_key = calls.admin_url(admin_url), api_key

    def ensure(
        self,
        build_context: str | None = None,
        image: str | None = None,
        *,
        dockerfile: str = "Dockerfile",
        repository: str | None = None,
        network: Network = "none",
        cpus: float | None = None,
        memory: str | None = None,
    ) -> ImageInfo:
        request = image_request(
            build_context,
            image,
            dockerfile=dockerfile,
            repository=repository,
            network=network,
            cpus=cpus,
            memory=memory,
        )
        call = calls.ensure_image(request)
        with httpx.Client(
            base_url=self.admin_url, headers=calls.auth_headers(self.api_key), verify=calls.tls_context()
        ) as http:
            try:
                response = http.request(call.method, call.path, **call.request_kwargs())
            except httpx.TransportError as exc:
                raise call.unsent(exc, http.base_url) from exc
            return call.finish(response)


class AsyncImages:
    """`Images` for asyncio code."""

    def __init__(self, admin_url: str | None = None, api_key: str | None = None) -> None:
        self.admin_url, self.api_key = calls.admin_url(admin_url), api_key

    async def ensure(
        self,
        build_context: str | None = None,
        image: str | None = None,
        *,
        dockerfile: str = "Dockerfile",
        repository: str | None = None,
        network: Network = "none",
        cpus: float | None = None,
        memory: str | None = None,
    ) -> ImageInfo:
        request = image_request(
            build_context,
            image,
            dockerfile=dockerfile,
            repository=repository,
            network=network,
            cpus=cpus,
            memory=memory,
        )
        call = calls.ensure_image(request)
        async with httpx.AsyncClient(
            base_url=self.admin_url, headers=calls.auth_headers(self.api_key), verify=calls.tls_context()
        ) as http:
            try:
                response = await http.request(call.method, call.path, **call.request_kwargs())
            except httpx.TransportError as exc:
                raise call.unsent(exc, http.base_url) from exc
            return call.finish(response)
