"""The world's task shapes, as fixtures written here (rome/tasks/fixtures), validated on real Docker
through a private ROCK fleet with its package cache (offline, seeded by set-up): a Harbor multi-step task,
a Terminal-Bench task without run-tests.sh, an image without python3, a grader that installs uv with curl
and runs `uvx pytest --ctrf`, a Dockerfile with `pip install`, and every network key among them."""

from pathlib import Path

import pytest

from rock.packages.cache import default_folder
from rome.bench.runner import load_finished
from rome.bench.validate import validate_tasks
from rome.terminal_tasks.sandbox import SandboxProvider
from rome.terminal_tasks.task import load_tasks

pytestmark = [pytest.mark.docker, pytest.mark.slow]
WORLD = Path(__file__).resolve().parents[2] / "rome" / "tasks" / "fixtures"


@pytest.fixture
def provider(request: pytest.FixtureRequest) -> SandboxProvider:
    """The session's private fleet (tests/conftest.py), which serves the seeded package cache offline."""
    if not (default_folder() / "pypi").is_dir():
        pytest.fail(
            f"no package cache in {default_folder()}: run `rock packages seed` (scripts/setup.sh does)"
        )
    provider: SandboxProvider = request.getfixturevalue("rock_provider")
    return provider


def test_every_fixture_validates_under_the_default_policy(provider, tmp_path) -> None:
    suite = load_tasks(WORLD)
    assert suite.errors == []
    report = validate_tasks(suite.tasks, suite.errors, tmp_path, concurrency=2, provider=provider)
    assert {r.task_id: r.problem for r in report.rows if not r.ok} == {}
    assert len(report.rows) == 5
    multi = next(r for r in report.rows if r.task_id == "multi-step-notes")
    # Per step: the oracle passes both; nop fails the first, whose min_reward then stops the trial.
    assert [(s.name, s.oracle_reward, s.nop_reward) for s in multi.steps] == [
        ("01-create", 1.0, 0.0),
        ("02-extend", 1.0, None),
    ]
    by_id = {t.task_id: t for t in load_finished(tmp_path / "oracle").values()}
    # Asking for the internet without the operator's consent gets the package cache, with a note.
    for task_id in ("uv-curl-ctrf", "pip-in-dockerfile"):
        assert by_id[task_id].network == "packages"
        assert any("--allow-internet" in note for note in by_id[task_id].notes)
    assert by_id["multi-step-notes"].network == "none" and by_id["multi-step-notes"].notes == []


def test_without_the_cache_a_network_need_is_an_infra_error_not_a_failure(tmp_path) -> None:
    suite = load_tasks(WORLD, ["uv-curl-ctrf"])
    # uv's three backed-off retries of a lookup that cannot succeed only wait (7-8 s a trial); without them
    # the grader fails on the same resolution error.
    tasks = [
        t.model_copy(update={"verifier_env": {**t.verifier_env, "UV_HTTP_RETRIES": "0"}}) for t in suite.tasks
    ]
    from rock.fleet import LocalFleet
    from rome.terminal_tasks.rock_sandbox import RockProvider

    # No package cache: the grader's uvx cannot reach an index. The fixtures' folder is a build root.
    with LocalFleet(admin_args=["--build-context-root", str(WORLD)]) as fleet:
        report = validate_tasks(tasks, [], tmp_path, provider=RockProvider(fleet.url))
    (row,) = report.rows
    assert row.cannot_run is not None and not row.broken
    assert row.problem.startswith("cannot run here, because oracle: network needed")
    assert "name resolution" in row.problem
