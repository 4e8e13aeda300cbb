"""GEM over ROCK: environments in sandboxes behind the env routes give what local GEM gives.
Real Docker, a real fleet, the env service on loopback."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from rock.envs.routes import create_app
from rock.fleet import free_port
from rock.sdk.env_errors import EnvError, EnvNotFound, UnknownEnvId
from rock.sdk.envs import list_envs, make

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# Env ids and actions: valid and invalid moves, so the games' own rules (and their randomness) are exercised.
GEM_CASES = [
    ("game:GuessTheNumber-v0-easy", 7, ["\\boxed{5}", "\\boxed{3}", "\\boxed{8}", "\\boxed{2}"]),
    ("game:Mastermind-v0-easy", 11, ["\\boxed{1 2 3 4}", "\\boxed{4 3 2 1}", "no guess"]),
    ("game:Minesweeper-v0-easy", 5, ["\\boxed{reveal 1 1}", "\\boxed{reveal 2 3}", "\\boxed{flag 0 0}"]),
    ("game:TowerofHanoi-v0-easy", 2, ["\\boxed{0 2}", "\\boxed{0 1}", "\\boxed{2 1}"]),
]


@pytest.fixture(scope="module")
def envs_url() -> Iterator[str]:
    """The env service on a local fleet (see rock.fleet)."""
    from rock.fleet import LocalFleet
    from rock.images import ensure_base_images

    ensure_base_images()
    port = free_port()
    with LocalFleet(slots=8) as fleet:
        app = create_app(fleet.url)
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        try:
            deadline = time.monotonic() + 30
            while not server.started:
                assert thread.is_alive() and time.monotonic() < deadline, "the env service did not start"
                time.sleep(0.05)
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True
            thread.join(timeout=60)


def plain(value: Any) -> Any:
    """What a value looks like after crossing JSON (tuples become lists, numpy becomes numbers)."""
    return json.loads(json.dumps(value, default=lambda v: v.tolist() if hasattr(v, "tolist") else str(v)))


def local_episode(env_id: str, seed: int, actions: list[str]) -> list[Any]:
    import gem

    env = gem.make(env_id)
    steps: list[Any] = [plain(env.reset(seed=seed))]
    for action in actions:
        step = plain(env.step(action))
        steps.append(step)
        if step[2] or step[3]:
            break
    return steps


def remote_episode(url: str, env_id: str, seed: int, actions: list[str]) -> list[Any]:
    with make(env_id, url=url) as env:
        steps: list[Any] = [plain(env.reset(seed=seed))]
        for action in actions:
            step = plain(env.step(action))
            steps.append(step)
            if step[2] or step[3]:
                break
        return steps


@pytest.mark.parametrize(("env_id", "seed", "actions"), GEM_CASES, ids=[case[0] for case in GEM_CASES])
def test_gem_over_rock_matches_local_gem(envs_url: str, env_id: str, seed: int, actions: list[str]):
    remote = remote_episode(envs_url, env_id, seed, actions)
    assert remote == local_episode(env_id, seed, actions)
    assert len(remote) >= 2


def test_list_names_registered_and_open_envs(envs_url: str):
    with make("game:GuessTheNumber-v0-easy", url=envs_url) as env:
        listed = list_envs(envs_url)
        assert "game:Sudoku-v0-easy" in listed.registered
        assert [(e.handle, e.env_id) for e in listed.open] == [(env.handle, "game:GuessTheNumber-v0-easy")]
    assert list_envs(envs_url).open == []


def test_bad_ids_and_closed_envs_get_clear_errors(envs_url: str, tmp_path: Path):
    with pytest.raises(UnknownEnvId, match="not a registered GEM environment"):
        make("game:NoSuchGame-v0", url=envs_url)
    with pytest.raises(UnknownEnvId, match="played where it is made"):
        make(f"terminal:{tmp_path}", url=envs_url)
    env = make("game:GuessTheNumber-v0-easy", url=envs_url)
    handle = env.handle
    env.close()
    gone = httpx.post(f"{envs_url}/envs/{handle}/reset", json={})
    assert gone.status_code == 404 and gone.json()["error"]["type"] == EnvNotFound.__name__
    assert handle in gone.json()["error"]["message"]
    with pytest.raises(EnvError, match="cannot reach the env service"):
        make("game:GuessTheNumber-v0-easy", url=f"http://127.0.0.1:{free_port()}")


def test_an_action_longer_than_one_argv_string_reaches_the_env(envs_url: str):
    """200 KB: past the kernel's 128 KiB limit on one argument, so it must not pass through a shell's argv."""
    action = "\\boxed{5}" + " " * 200_000
    remote = remote_episode(envs_url, "game:GuessTheNumber-v0-easy", 7, [action])
    assert remote == local_episode("game:GuessTheNumber-v0-easy", 7, [action])
    assert len(remote) == 2
