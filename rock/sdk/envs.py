"""`rock.make(env_id, ...)`: a GEM environment hosted by ROCK, with GEM's `reset` and `step`.

`url` is `rock envs serve`'s or an admin's (`rock admin serve` mounts the same routes); ROCK_API_KEY, when
set, is sent as the key a keyed admin asks for.

env = make("game:GuessTheNumber-v0-easy", url="http://127.0.0.1:8091")
observation, info = env.reset(seed=3)
observation, reward, terminated, truncated, info = env.step("\\boxed{5}")
env.close()
"""

from __future__ import annotations

import os
from typing import Any

import httpx

from rock.sdk.calls import auth_headers
from rock.sdk.env_errors import ERRORS, EnvError
from rock.sdk.env_types import EnvList, MakeResponse, ResetResponse, StepResponse

DEFAULT_URL = "http://127.0.0.1:8091"


def envs_url(url: str | None) -> str:
    return (url or os.environ.get("ROCK_ENVS_URL") or DEFAULT_URL).rstrip("/")


def _call(http: httpx.Client, method: str, path: str, **kwargs: Any) -> Any:
    try:
        response = http.request(method, path, **kwargs)
    except httpx.TransportError as error:
        raise EnvError(
            f"cannot reach the env service at {http.base_url} ({error}); start it with `rock envs serve` "
            "or pass url= (or set ROCK_ENVS_URL)"
        ) from error
    if response.is_error:
        try:
            error = response.json()["error"]
            raise ERRORS.get(error.get("type"), EnvError)(error["message"])
        except (ValueError, KeyError, TypeError):
            raise EnvError(f"{method} {path} -> {response.status_code}: {response.text[:500]}") from None
    return response.json()


class RemoteEnv:
    """One environment on the env service; GEM's interface."""

    def __init__(self, http: httpx.Client, handle: str, env_id: str) -> None:
        self._http = http
        self.handle = handle
        self.env_id = env_id

    def reset(self, seed: int | None = None) -> tuple[Any, dict[str, Any]]:
        answer = ResetResponse.model_validate(
            _call(self._http, "POST", f"/envs/{self.handle}/reset", json={"seed": seed})
        )
        return answer.observation, answer.info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        body = {"action": action}
        answer = StepResponse.model_validate(
            _call(self._http, "POST", f"/envs/{self.handle}/step", json=body)
        )
        return answer.observation, answer.reward, answer.terminated, answer.truncated, answer.info

    def close(self) -> None:
        try:
            _call(self._http, "POST", f"/envs/{self.handle}/close")
        finally:
            self._http.close()

    def __enter__(self) -> RemoteEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make(
    env_id: str,
    *,
    url: str | None = None,
    api_key: str | None = None,
    timeout_s: float = 900.0,
    **kwargs: Any,
) -> RemoteEnv:
    """Make `env_id` (a registered GEM id) in a sandbox of `api_key`'s (default: $ROCK_API_KEY); `kwargs` go
    to its constructor."""
    http = httpx.Client(base_url=envs_url(url), timeout=timeout_s, headers=auth_headers(api_key))
    try:
        made = MakeResponse.model_validate(
            _call(http, "POST", "/envs/make", json={"env_id": env_id, "kwargs": kwargs})
        )
    except BaseException:
        http.close()
        raise
    return RemoteEnv(http, made.handle, made.env_id)


def list_envs(url: str | None = None, api_key: str | None = None) -> EnvList:
    """The caller's open environments and the GEM ids the host knows."""
    with httpx.Client(base_url=envs_url(url), timeout=60, headers=auth_headers(api_key)) as http:
        return EnvList.model_validate(_call(http, "GET", "/envs/list"))
