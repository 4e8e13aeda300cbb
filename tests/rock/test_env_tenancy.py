"""The admin's GEM env routes between tenants (issue 26 item 9): an environment is its maker's (another key's
handle is unknown: 404), and its sandbox is made under the maker's key, counted against the maker's quota."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import httpx
import pytest
import yaml

from rock.fleet import LocalFleet, short_tmp

pytestmark = [pytest.mark.docker, pytest.mark.slow]
ENV_ID = "game:GuessTheNumber-v0-easy"
ALICE, BOB = secrets.token_urlsafe(24), secrets.token_urlsafe(24)


@pytest.fixture(scope="module")
def fleet() -> Iterator[LocalFleet]:
    from rock.images import ensure_base_images

    ensure_base_images()
    state = short_tmp("rock-envt-")
    keys = state / "keys.yaml"
    keys.write_text(
        yaml.safe_dump(
            [
                {"name": "alice", "key": ALICE, "max_sandboxes": 1},
                {"name": "bob", "key": BOB, "max_sandboxes": 4},
            ]
        )
    )
    with LocalFleet(state, admin_args=["--keys", str(keys)]) as started:
        yield started


def call(fleet: LocalFleet, key: str, method: str, path: str, **kwargs: object) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"}
    return httpx.request(method, f"{fleet.url}{path}", headers=headers, timeout=900, **kwargs)  # type: ignore[arg-type]


def test_an_env_is_its_makers_and_counts_against_its_quota(fleet: LocalFleet):
    made = call(fleet, ALICE, "POST", "/envs/make", json={"env_id": ENV_ID})
    assert made.status_code == 200, made.text
    handle = made.json()["handle"]
    try:
        assert [e["handle"] for e in call(fleet, ALICE, "GET", "/envs/list").json()["open"]] == [handle]
        assert call(fleet, BOB, "GET", "/envs/list").json()["open"] == []
        for op, body in [("reset", {"seed": 1}), ("step", {"action": "\\boxed{5}"}), ("close", None)]:
            answer = call(fleet, BOB, "POST", f"/envs/{handle}/{op}", json=body)
            assert answer.status_code == 404, (op, answer.text)
            assert answer.json()["error"]["type"] == "EnvNotFound"
        owners = [s["owner"] for s in call(fleet, ALICE, "GET", "/v1/sandboxes").json()]
        assert owners == ["alice"]
        assert call(fleet, BOB, "GET", "/v1/sandboxes").json() == []
        second = call(fleet, ALICE, "POST", "/envs/make", json={"env_id": ENV_ID})
        assert second.status_code == 400, second.text
        assert "quota 1" in second.json()["error"]["message"]
        assert call(fleet, ALICE, "POST", f"/envs/{handle}/reset", json={"seed": 1}).status_code == 200
    finally:
        closed = call(fleet, ALICE, "POST", f"/envs/{handle}/close")
    assert closed.status_code == 200, closed.text
    assert call(fleet, ALICE, "GET", "/v1/sandboxes").json() == []
