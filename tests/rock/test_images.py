"""The alias table and Dockerfile rewriting (pure), and real builds through Docker (marked `docker`)."""

import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rock.images import (
    BUSYBOX,
    DEBIAN,
    PYTHON,
    ImageAliases,
    ImageBuildError,
    ImageConfigError,
    UnknownImage,
    build_image,
    ensure_base_images,
    load_aliases,
    resolve_image,
)
from rock.images.aliases import normalize
from rock.images.build import rewrite_dockerfile
from rock.images.cli import app


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("python:3.11-slim", PYTHON),
        ("python:3.11", PYTHON),
        ("python:3.12-slim-bookworm", PYTHON),
        ("docker.io/library/python:3.11-slim", PYTHON),
        ("python", PYTHON),
        ("debian:bookworm", DEBIAN),
        ("debian:bookworm-slim", DEBIAN),
        ("ubuntu:24.04", DEBIAN),
        ("ubuntu:22.04", DEBIAN),
        ("ubuntu", DEBIAN),
        ("busybox", BUSYBOX),
        ("busybox:1.36", BUSYBOX),
        ("node:20", None),
        ("ghcr.io/someone/python:3.11", None),
        ("ale/python:3.11", None),
    ],
)
def test_default_aliases(name: str, expected: str | None) -> None:
    assert ImageAliases().lookup(name) == expected


def test_normalize() -> None:
    assert normalize("python") == "python:latest"
    assert normalize("index.docker.io/library/debian:12") == "debian:12"
    assert normalize("localhost:5000/team/app") == "localhost:5000/team/app:latest"
    assert normalize("python@sha256:abc") == "python@sha256:abc"


def test_alias_file_overrides_defaults(tmp_path: Path) -> None:
    path = tmp_path / "images.yaml"
    path.write_text('aliases:\n  "ubuntu:*": ale/python:3.11\n  "node:20*": my/node:20\n')
    table = load_aliases(path)
    assert table.lookup("ubuntu:24.04") == PYTHON
    assert table.lookup("node:20-slim") == "my/node:20"
    assert table.lookup("debian:bookworm") == DEBIAN
    assert load_aliases(tmp_path / "absent.yaml").lookup("python:3.11-slim") == PYTHON


@pytest.mark.parametrize("content", ["aliases: [1, 2]\n", "mapping:\n  a: b\n", "aliases: {a: [\n"])
def test_bad_alias_file_names_the_file_and_the_shape(tmp_path: Path, content: str) -> None:
    path = tmp_path / "images.yaml"
    path.write_text(content)
    with pytest.raises(ImageConfigError, match=r"images\.yaml is not a valid alias table") as caught:
        load_aliases(path)
    assert "aliases:" in str(caught.value)


def test_rewrite_dockerfile_maps_bases_but_not_stages() -> None:
    dockerfile = "\n".join(
        [
            "ARG BASE=debian:bookworm",
            "FROM --platform=linux/amd64 python:3.11-slim AS builder",
            "RUN echo build",
            "FROM ${BASE}",
            "from builder as again",
            "FROM scratch",
            "COPY --from=builder /a /a",
            "COPY --from=busybox:1.36 /bin/busybox /bin/busybox",
            "COPY --from=0 /b /b",
        ]
    )
    rewritten = rewrite_dockerfile(dockerfile, lambda name: ImageAliases().lookup(name) or name).splitlines()
    assert rewritten == [
        "ARG BASE=debian:bookworm",
        "FROM --platform=linux/amd64 ale/python:3.11 AS builder",
        "RUN echo build",
        "FROM ${BASE}",
        "from builder as again",
        "FROM scratch",
        "COPY --from=builder /a /a",
        "COPY --from=ale/busybox:latest /bin/busybox /bin/busybox",
        "COPY --from=0 /b /b",
    ]


@pytest.fixture(scope="module")
def base_images() -> dict[str, str]:
    return ensure_base_images()


def _run(image: str, *command: str) -> str:
    return subprocess.run(
        ["docker", "run", "--rm", "--network", "none", image, *command],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


@pytest.mark.docker
def test_base_images_exist_and_bootstrap_is_idempotent(base_images: dict[str, str]) -> None:
    assert set(base_images) == {DEBIAN, PYTHON, BUSYBOX}
    assert ensure_base_images() == base_images
    assert _run(PYTHON, "python", "-c", "import sys, venv, pip; print(sys.version_info[:2])") == "(3, 11)\n"
    assert "bookworm" in _run(DEBIAN, "cat", "/etc/os-release")
    listing = _run(BUSYBOX, "sh", "-c", "ls /bin | wc -l; ls /lib /usr/lib 2>&1; which python3 || echo none")
    assert "none" in listing and "No such file" in listing


@pytest.mark.docker
def test_resolve_image(base_images: dict[str, str]) -> None:
    assert resolve_image("python:3.11-slim") == PYTHON
    assert resolve_image("ubuntu:24.04") == DEBIAN
    assert resolve_image(PYTHON) == PYTHON
    with pytest.raises(UnknownImage, match="rock image build"):
        resolve_image("no-such-image-anywhere:1.0")


@pytest.mark.docker
@pytest.mark.slow
def test_build_through_aliases_is_cached_by_content(base_images: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(
        "FROM python:3.11-slim AS base\n"
        "RUN python -c \"print('built')\" > /built.txt\n"
        "FROM base\n"
        "COPY app.py /app.py\n"
        'CMD ["python", "/app.py"]\n'
    )
    (tmp_path / "app.py").write_text("print(open('/built.txt').read().strip(), 'and ran')\n")
    tag = build_image(tmp_path)
    assert tag.startswith("ale/build-")
    assert _run(tag) == "built and ran\n"
    assert build_image(tmp_path) == tag
    (tmp_path / "app.py").write_text("print('changed')\n")
    changed = build_image(tmp_path)
    assert changed != tag
    assert _run(changed) == "changed\n"
    named = build_image(tmp_path, tag="ale/test-named:1")
    assert named == "ale/test-named:1"
    subprocess.run(["docker", "rmi", "-f", tag, changed, named], capture_output=True, check=False)


@pytest.mark.docker
def test_failing_build_reports_the_log_tail(base_images: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(
        "FROM debian:bookworm\nRUN echo first-step-ran\nRUN sh -c 'echo the-reason-it-failed >&2; exit 3'\n"
    )
    with pytest.raises(ImageBuildError) as caught:
        build_image(tmp_path)
    assert "the-reason-it-failed" in caught.value.log_tail
    assert "first-step-ran" in caught.value.log_tail
    assert "non-zero code: 3" in str(caught.value)
    with pytest.raises(ImageBuildError, match=r"no Missing\.Dockerfile in"):
        build_image(tmp_path / "..", dockerfile="Missing.Dockerfile")
    (tmp_path / "Dockerfile").write_text("FROM node:20\n")
    with pytest.raises(UnknownImage, match="alias table"):
        build_image(tmp_path)


@pytest.mark.docker
def test_cli(base_images: dict[str, str], tmp_path: Path) -> None:
    runner = CliRunner()
    listed = runner.invoke(app, ["ls"])
    assert listed.exit_code == 0, listed.output
    assert "ale/python:3.11" in listed.output and "ubuntu:*" in listed.output
    bootstrapped = runner.invoke(app, ["bootstrap"])
    assert bootstrapped.exit_code == 0 and "up to date" in bootstrapped.output
    (tmp_path / "Dockerfile").write_text("FROM busybox\nRUN exit 5\n")
    failed = runner.invoke(app, ["build", str(tmp_path)])
    assert failed.exit_code == 1
    assert "returned a non-zero code: 5" in failed.output
