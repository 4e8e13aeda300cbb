"""The task library asks the fleet for a task's image (no Docker here): the name it gives the image, and what
a fleet's refusal becomes (a TaskImageError that says which task and what to do)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from rock.admin.config import AdminConfig
from rock.fleet import AdminThread, free_port, short_tmp
from rome.terminal_tasks.rock_sandbox import default_build_network, ensure_image
from rome.terminal_tasks.task import Task, TaskImageError, image_repository, load_task


def make_task(folder: Path, task_id: str) -> Task:
    d = folder / task_id
    (d / "environment").mkdir(parents=True)
    (d / "tests").mkdir()
    (d / "environment" / "Dockerfile").write_text("FROM python:3.11-slim\nWORKDIR /app\n")
    (d / "tests" / "test.sh").write_text("true\n")
    (d / "instruction.md").write_text("Do nothing.\n")
    (d / "task.toml").write_text("")
    task = load_task(d)
    assert isinstance(task, Task)
    return task


@pytest.fixture
def admin(tmp_path: Path) -> Iterator[str]:
    config = AdminConfig(
        port=free_port(), state_dir=short_tmp("rome-images-"), limits={"build_contexts": [tmp_path / "root"]}
    )
    try:
        with AdminThread(config) as thread:
            yield thread.url
    finally:
        shutil.rmtree(config.state_dir, ignore_errors=True)


def test_the_image_is_named_for_the_task_and_valid_for_docker(tmp_path: Path) -> None:
    assert image_repository(make_task(tmp_path, "Text_Search-1000")) == "rome-bench/text_search-1000"
    assert image_repository(make_task(tmp_path, "é-task")) == "rome-bench/task"


def test_a_task_outside_the_fleets_roots_or_without_a_worker_fails_with_its_id(admin, tmp_path: Path) -> None:
    assert default_build_network(admin) == "none"  # this admin has no package cache
    with pytest.raises(
        TaskImageError, match=r"^outside: the fleet did not make its image: .*--build-context-root"
    ):
        ensure_image(make_task(tmp_path, "outside"), admin)
    with pytest.raises(TaskImageError, match=r"^inside: .*no worker is connected"):
        ensure_image(make_task(tmp_path / "root", "inside"), admin)


def test_the_build_network_follows_the_fleet_now_answering_at_an_address(monkeypatch) -> None:
    """A new fleet on an address an earlier one used (tests reuse ports) is asked afresh; a fleet that does
    not answer keeps the last answer, so a run's images keep their build arguments."""
    from rome.terminal_tasks import rock_sandbox

    answers = iter([{"package_cache": True}, {"package_cache": False}, {}, {"package_cache": True}, {}])
    monkeypatch.setattr(rock_sandbox, "fleet_health", lambda url: next(answers))
    url = "http://127.0.0.1:1"
    seen = [default_build_network(url) for _ in range(5)]
    assert seen == ["packages", "none", "none", "packages", "packages"]
