"""The fleet builds images through its API on real Docker: a task's image is built by the worker from a
folder under the fleet's build root (content-hash tags, the image's WORKDIR, alias notes), a sandbox runs
from it, and the task library's `ensure_image` and `RockSandbox` use it with no Docker of the caller's."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from rock.fleet import LocalFleet, short_tmp
from rock.sdk import Sandbox
from rock.sdk.errors import BadRequest, ImageFailed
from rock.sdk.images import Images

pytestmark = pytest.mark.docker
SMALL = {"cpus": 0.5, "memory": "128m"}


@pytest.fixture(scope="module")
def fleet_and_root() -> Iterator[tuple[LocalFleet, Path]]:
    from rock.images import ensure_base_images

    ensure_base_images()
    root = short_tmp("rock-image-root-")
    try:
        with LocalFleet(admin_args=["--build-context-root", str(root)]) as fleet:
            yield fleet, root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def context(root: Path, name: str, dockerfile: str) -> Path:
    folder = root / name
    folder.mkdir()
    (folder / "Dockerfile").write_text(dockerfile)
    return folder


def test_a_folder_is_built_by_the_fleet_named_by_its_content(fleet_and_root) -> None:
    fleet, root = fleet_and_root
    recipe = "FROM ubuntu:24.04\nWORKDIR /app\nRUN echo {} > /app/marker\n"
    images = Images(admin_url=fleet.url)
    first = images.ensure(build_context=str(context(root, "a", recipe.format(1))), repository="ale-test/api")
    other = images.ensure(build_context=str(context(root, "b", recipe.format(2))), repository="ale-test/api")
    again = images.ensure(build_context=str(context(root, "c", recipe.format(1))), repository="ale-test/api")
    try:
        assert first.tag.startswith("ale-test/api:") and first.tag != other.tag and again.tag == first.tag
        assert first.workdir == "/app" and first.worker == fleet.worker_id
        (note,) = first.notes  # ubuntu is built as Debian here, and the trial is told
        assert note.startswith("ubuntu:24.04 is built as Debian bookworm")
        with Sandbox(first.tag, admin_url=fleet.url, **SMALL) as sandbox:
            assert sandbox.exec(["cat", "marker"], cwd=first.workdir).output.strip() == "1"
        resolved = images.ensure(image="busybox")
        assert (resolved.tag, resolved.workdir, resolved.notes) == ("ale/busybox:latest", "/", [])
    finally:
        import docker

        client = docker.from_env()
        for tag in {first.tag, other.tag}:
            client.images.remove(tag, force=True)
        client.close()


def test_a_build_is_refused_outside_the_root_and_a_failed_one_says_why(fleet_and_root, tmp_path) -> None:
    fleet, root = fleet_and_root
    images = Images(admin_url=fleet.url)
    outside = tmp_path / "x"
    outside.mkdir()
    (outside / "Dockerfile").write_text("FROM busybox\n")
    with pytest.raises(BadRequest, match="--build-context-root"):
        images.ensure(build_context=str(outside))
    broken = context(root, "broken", "FROM busybox\nRUN exit 3\n")
    with pytest.raises(ImageFailed, match="returned a non-zero code: 3"):
        images.ensure(build_context=str(broken), repository="ale-test/broken")
    # No network by default: a RUN step cannot reach anything.
    offline = context(root, "offline", "FROM busybox\nRUN wget -q -T 3 http://1.1.1.1/ -O /dev/null\n")
    with pytest.raises(ImageFailed):
        images.ensure(build_context=str(offline), repository="ale-test/offline")


def test_the_task_library_builds_through_the_fleet(fleet_and_root) -> None:
    from rome.terminal_tasks.rock_sandbox import RockSandbox, ensure_image
    from rome.terminal_tasks.task import Task, load_task

    fleet, root = fleet_and_root
    task_dir = root / "task-one"
    (task_dir / "environment").mkdir(parents=True)
    (task_dir / "tests").mkdir()
    (task_dir / "environment" / "Dockerfile").write_text("FROM python:3.11-slim\nWORKDIR /srv/work\n")
    (task_dir / "tests" / "test.sh").write_text("true\n")
    (task_dir / "instruction.md").write_text("Do nothing.\n")
    (task_dir / "task.toml").write_text("")
    task = load_task(task_dir)
    assert isinstance(task, Task)
    image = ensure_image(task, fleet.url)
    try:
        assert image.tag.startswith("rome-bench/task-one:") and image.workdir == "/srv/work"
        sandbox = RockSandbox(image, task, fleet.url)
        try:
            assert sandbox.run("pwd", timeout=30).output.strip() == "/srv/work"
        finally:
            sandbox.close()
    finally:
        import docker

        client = docker.from_env()
        client.images.remove(image.tag, force=True)
        client.close()
