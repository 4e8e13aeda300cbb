"""Calls to the upstream OpenAI-compatible server, with retries on 429/5xx and unreachable hosts."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from rock.proxy.errors import ProxyError
from rock.proxy.types import ProxyConfig

RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})


class Upstream:
    """One base URL and key; `post` returns the JSON answer or raises a `ProxyError` with the upstream's."""

    def __init__(self, config: ProxyConfig) -> None:
        assert config.upstream_url is not None
        self.config = config
        self.base_url = config.upstream_url.rstrip("/")
        headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        timeout = httpx.Timeout(config.timeout_s, connect=10.0)
        self.http = httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=timeout)
        self._model: str | None = config.model

    async def aclose(self) -> None:
        await self.http.aclose()

    async def model(self) -> str:
        """The configured model name, or the first one the upstream lists."""
        if self._model is None:
            response = await self.send("GET", "/models")
            models = response.json().get("data") or []
            if not models:
                raise ProxyError(
                    f"{self.base_url}/models lists no model; pass the model name to the proxy",
                    status=502,
                    code="upstream_error",
                )
            self._model = str(models[0]["id"])
        return self._model

    async def chat(self, request: dict[str, Any]) -> dict[str, Any]:
        """Train mode's engine call (`rock.proxy.train.ChatEngine`) over HTTP."""
        return await self.post_json("/chat/completions", request)

    async def post_json(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = await self.send("POST", path, json=body)
        return response.json()

    async def send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """The upstream's answer; 429/5xx and connection errors are retried with exponential backoff."""
        attempt = 0
        while True:
            try:
                response = await self.http.request(method, path, **kwargs)
            except httpx.TransportError as error:
                if attempt >= self.config.max_retries:
                    raise ProxyError(
                        f"the upstream {self.base_url} is unreachable ({type(error).__name__}: {error}) "
                        f"after {attempt + 1} attempts; check that it runs and the URL is right",
                        status=502,
                        code="upstream_unreachable",
                    ) from error
            else:
                if response.status_code not in RETRYABLE_STATUS or attempt >= self.config.max_retries:
                    if response.is_error:
                        raise upstream_error(response)
                    return response
            await asyncio.sleep(self.config.backoff_s * 2**attempt)
            attempt += 1

    def stream(self, path: str, body: dict[str, Any]) -> Any:
        return self.http.stream("POST", path, json=body)


def upstream_error(response: httpx.Response) -> ProxyError:
    """The upstream's error, passed on with its status and message."""
    try:
        message = response.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = response.text[:500]
    return ProxyError(
        f"upstream answered {response.status_code}: {message}",
        status=response.status_code,
        code="upstream_error",
    )
