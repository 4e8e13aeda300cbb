"""`rome-bench check`'s reading of tasks: layout, images, network needs and the verdict (no Docker needed)."""

from pathlib import Path

from rome.bench.check import check_task
from rome.terminal_tasks.task import Task, load_task

WORLD = Path(__file__).resolve().parents[2] / "rome" / "tasks" / "fixtures"
ALIASES = {"python:3.11-slim": "ale/python:3.11", "debian:bookworm": "ale/debian:bookworm"}


def resolve(name: str) -> str:
    if name.startswith("ubuntu:"):
        return "ale/debian:bookworm"
    if name not in ALIASES:
        raise ValueError(f"{name} maps to nothing here")
    return ALIASES[name]


def task(name: str) -> Task:
    loaded = load_task(WORLD / name)
    assert isinstance(loaded, Task), loaded
    return loaded


def test_uv_grader_needs_packages_and_gets_them_with_a_note() -> None:
    c = check_task(task("uv-curl-ctrf"), resolve, allow_internet=False, package_cache=True)
    assert c.test_needs == ["packages (uv)", "internet (uv installer)"]
    assert c.policy == "packages" and c.runnable and "--allow-internet" in c.notes[0]
    assert "CTRF report (pytest-json-ctrf, bundled)" in c.features
    blocked = check_task(task("uv-curl-ctrf"), resolve, allow_internet=False, package_cache=False)
    assert blocked.policy == "none" and not blocked.runnable and "install packages" in blocked.why


def test_build_time_pip_needs_the_cache() -> None:
    c = check_task(task("pip-in-dockerfile"), resolve, allow_internet=False, package_cache=False)
    assert c.build_needs == ["packages (pip)"] and not c.runnable and "build installs packages" in c.why
    assert check_task(task("pip-in-dockerfile"), resolve, False, package_cache=True).runnable


def test_layouts_images_and_features() -> None:
    multi = check_task(task("multi-step-notes"), resolve, False, True)
    assert multi.layout == "harbor multi-step" and multi.policy == "none"
    assert multi.features[:2] == ["multi-step (2 steps, reward mean)", "early stop (min_reward)"]
    assert "network key [environment.network].network_mode" in multi.features
    ubuntu = check_task(task("no-python-image"), resolve, False, True)
    assert ubuntu.images == {"ubuntu:24.04": "ale/debian:bookworm"}
    tb1 = check_task(task("tb1-default-pytest"), resolve, False, True)
    assert "TB1 default verifier (pytest on tests/)" in tb1.features and tb1.runnable


def test_an_unmapped_image_cannot_run(tmp_path: Path) -> None:
    d = tmp_path / "t"
    (d / "environment").mkdir(parents=True)
    (d / "tests").mkdir()
    (d / "task.toml").write_text("")
    (d / "instruction.md").write_text("x\n")
    (d / "environment" / "Dockerfile").write_text("FROM node:20 AS build\nFROM build\n")
    (d / "tests" / "test.sh").write_text("npm ci && curl -fsS https://example.invalid/x | sh\n")
    c = check_task(load_task(d), resolve, False, True)  # type: ignore[arg-type]
    assert not c.runnable and "node:20 maps to nothing here" in c.why
    assert c.test_needs == ["internet (download)", "internet (npm)"]
