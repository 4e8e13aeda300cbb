"""`ProxyClient`: what a rollout worker does with the proxy (episodes, sandbox sockets)."""

from __future__ import annotations

from typing import Any

import httpx

from rock.proxy.types import EpisodeRecord
from rock.sdk.calls import tls_context


class ProxyClientError(RuntimeError):
    """The proxy refused a control call; the message carries its reason."""


class ProxyClient:
    def __init__(self, url: str, timeout_s: float = 30.0) -> None:
        self.url = url.rstrip("/")
        # One per episode: the SDK's shared TLS settings spare loading the CA store (~20 ms of CPU) each time.
        self.http = httpx.Client(base_url=self.url, timeout=timeout_s, verify=tls_context())

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> ProxyClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.http.request(method, path, **kwargs)
        if response.is_error:
            try:
                message = response.json()["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = response.text[:500]
            raise ProxyClientError(
                f"model proxy {self.url}: {method} {path} -> {response.status_code}: {message}"
            )
        return response.json()

    def open_episode(
        self,
        episode_id: str | None = None,
        sandbox_id: str | None = None,
        context: dict[str, Any] | None = None,
        max_chunks: int | None = None,
    ) -> str:
        body = {
            "episode_id": episode_id,
            "sandbox_id": sandbox_id,
            "context": context or {},
            "max_chunks": max_chunks,
        }
        return str(self._call("POST", "/episodes", json=body)["episode_id"])

    def episode(self, episode_id: str) -> EpisodeRecord:
        return EpisodeRecord.model_validate(self._call("GET", f"/episodes/{episode_id}"))

    def end_episode(self, episode_id: str) -> EpisodeRecord:
        return EpisodeRecord.model_validate(self._call("POST", f"/episodes/{episode_id}/end"))

    def episode_url(self, episode_id: str) -> str:
        """The OpenAI base URL (ending in /v1) of an episode, for an agent on the host."""
        return f"{self.url}/episodes/{episode_id}/v1"

    def attach_socket(self, sandbox_id: str, path: str, episode_id: str | None = None) -> None:
        body = {"path": path, "episode_id": episode_id}
        self._call("PUT", f"/sandboxes/{sandbox_id}/socket", json=body)

    def detach_socket(self, sandbox_id: str) -> None:
        self._call("DELETE", f"/sandboxes/{sandbox_id}/socket")
