"""build_context only from the operator's folders, and builds under the sandbox's limits (issue 26 item 7);
image names Docker would refuse are refused up front (item 10)."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rock.admin.config import AdminConfig, SpecLimits
from rock.fleet import LocalFleet, short_tmp
from rock.sdk.errors import BadRequest, SandboxFailed
from rock.sdk.sandbox import Sandbox
from rock.sdk.types import FailureReason, SandboxSpec
from rock.worker.config import WorkerConfig

SMALL = {"cpus": 0.5, "memory": "256m"}


def refusal(limits: SpecLimits, requested: str) -> str:
    with pytest.raises(BadRequest) as caught:
        limits.check(SandboxSpec(build_context=requested))
    return caught.value.message.replace(repr(requested), "PATH")


def test_only_the_operators_folders_may_be_built_and_every_other_path_reads_the_same(tmp_path: Path):
    root = tmp_path / "contexts"
    (root / "task").mkdir(parents=True)
    (root / "escape").symlink_to("/etc")
    limits = SpecLimits(build_contexts=[root])
    limits.check(SandboxSpec(build_context=str(root)))
    limits.check(SandboxSpec(build_context=str(root / "task")))
    limits.check(SandboxSpec(build_context=str(root / "not-made-yet")))
    answers = {
        refusal(limits, path)
        for path in ["/etc", "/nonexistent/x", "etc", f"{root}/../..", str(root / "escape"), f"{root}-other"]
    }
    assert len(answers) == 1, answers
    assert "not a folder this admin builds sandboxes from" in answers.pop()
    assert refusal(SpecLimits(), str(root)) == refusal(SpecLimits(), "/etc")


def test_a_build_root_may_not_hold_the_sandboxes_socket_folders(tmp_path: Path):
    worker = WorkerConfig(state_dir=tmp_path / "state")
    with pytest.raises(ValueError, match="overlaps the sandboxes' socket folders"):
        AdminConfig(state_dir=tmp_path, local_worker=worker, limits=SpecLimits(build_contexts=[tmp_path]))
    AdminConfig(state_dir=tmp_path, local_worker=worker, limits=SpecLimits(build_contexts=[tmp_path / "ctx"]))


VALID = ["python:3.11", "ale/debian:bookworm", "localhost:5000/a/b:v1", "Registry.Example.com/team/x"]


@pytest.mark.parametrize("name", [*VALID, "a__b-c/d.e", "busybox@sha256:" + "a" * 64])
def test_valid_image_names_pass(name: str):
    assert SandboxSpec(image=name).image == name


@pytest.mark.parametrize("name", ["UPPER/x", "Python:3.11", "registry.local/Team/app"])
def test_an_uppercase_repository_is_refused_naming_the_problem(name: str):
    """Docker's own answer (400, "repository name must be lowercase") came back as a 503 at start."""
    with pytest.raises(ValueError, match="repository name must be lowercase"):
        SandboxSpec(image=name)


# On real Docker ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def build_root() -> Iterator[Path]:
    root = short_tmp("rock-ctx-")
    yield root
    subprocess.run(["rm", "-rf", str(root)], check=False)


@pytest.fixture(scope="module")
def fleet(build_root: Path) -> Iterator[LocalFleet]:
    from rock.images import ensure_base_images

    ensure_base_images()
    with LocalFleet(admin_args=["--build-context-root", str(build_root)]) as started:
        yield started


@pytest.fixture
def context(build_root: Path) -> Iterator[Path]:
    """A fresh folder in the operator's root; the images built from it are removed after the test."""
    folder = build_root / f"ctx-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    yield folder
    found = subprocess.run(
        ["docker", "images", "-q", f"ale/build-{folder.name}"], capture_output=True, text=True, check=False
    )
    for image in set(found.stdout.split()):
        subprocess.run(["docker", "rmi", "-f", image], capture_output=True, check=False)


@pytest.mark.docker
def test_a_tenant_cannot_build_from_its_socket_folder_or_probe_host_paths(fleet: LocalFleet):
    """The attack: a Dockerfile written into the sandbox's own socket folder (its host path is in the API's
    answer) and built as root on the bridge; and build_context=/etc telling whether /etc has a Dockerfile."""
    with Sandbox("python:3.11", admin_url=fleet.url, **SMALL) as sandbox:
        assert sandbox.info is not None and sandbox.info.host_dir is not None
        sandbox.exec(["sh", "-c", "printf 'FROM debian:bookworm\\nRUN id\\n' > /run/rock/Dockerfile"])
        answers = []
        for path in [sandbox.info.host_dir, "/etc", "/nonexistent"]:
            with pytest.raises(BadRequest) as caught:
                Sandbox(build_context=path, admin_url=fleet.url, **SMALL).close()
            answers.append(caught.value.message.replace(repr(path), "PATH"))
    assert len(set(answers)) == 1, answers


@pytest.mark.docker
def test_an_image_name_docker_refuses_is_a_clear_error_not_a_503(fleet: LocalFleet):
    body = {"image": "UPPER/x", **SMALL}
    answer = httpx.post(f"{fleet.url}/v1/sandboxes", json=body, timeout=60)
    assert answer.status_code == 422
    assert "repository name must be lowercase" in answer.text


@pytest.mark.docker
def test_a_build_runs_with_the_sandboxes_network_memory_and_cpus(fleet: LocalFleet, context: Path):
    v1, v2 = "/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory.max"
    memory = f"echo memory=$(cat {v1} 2>/dev/null || cat {v2})"
    v1, v2 = "/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu.max"
    cpu = f"echo cpu=$(cat {v1} 2>/dev/null || cut -d' ' -f1 {v2})"
    probe = f"echo routes=$(($(wc -l < /proc/net/route) - 1)); {memory}; {cpu}"
    (context / "Dockerfile").write_text(f"FROM debian:bookworm\nRUN ({probe}) > /build-limits.txt\n")
    with Sandbox(build_context=str(context), admin_url=fleet.url, **SMALL) as sandbox:
        seen = dict(line.split("=", 1) for line in sandbox.exec(["cat", "/build-limits.txt"]).output.split())
    assert seen == {"routes": "0", "memory": str(256 * 2**20), "cpu": "50000"}


@pytest.mark.docker
def test_a_failing_build_reports_the_tail_of_its_log(fleet: LocalFleet, context: Path):
    (context / "Dockerfile").write_text("FROM debian:bookworm\nRUN echo about-to-fail && exit 3\n")
    with pytest.raises(SandboxFailed, match="about-to-fail") as caught:
        Sandbox(build_context=str(context), admin_url=fleet.url, **SMALL)
    assert caught.value.reason == FailureReason.IMAGE_ERROR


@pytest.mark.docker
def test_a_build_past_its_deadline_is_stopped_with_its_run_step(context: Path):
    from rock.images import ImageBuildError, build_image
    from rock.images.build import BuildLimits

    marker = f"{int.from_bytes(os.urandom(2), 'big') + 1000}"
    (context / "Dockerfile").write_text(f"FROM debian:bookworm\nRUN sleep {marker}\n")
    limits = BuildLimits(network="none", memory=256 * 2**20, cpus=0.5, timeout=5.0)
    with pytest.raises(ImageBuildError, match="ran past its limit of 5 s"):
        build_image(context, limits=limits)

    def sleeping() -> list[str]:
        listed = subprocess.run(
            ["docker", "ps", "--no-trunc", "--format", "{{.ID}} {{.Command}}"], capture_output=True, text=True
        )
        return [line for line in listed.stdout.splitlines() if f"sleep {marker}" in line]

    for _ in range(60):  # the engine stops the build's RUN container once its client has gone
        if not sleeping():
            break
        time.sleep(0.5)
    assert sleeping() == []


def test_admin_cli_takes_build_roots_and_a_quota_for_its_one_key(tmp_path: Path):
    from typer.testing import CliRunner

    from rock.cli import app

    alone = CliRunner().invoke(app, ["admin", "serve", "--max-sandboxes", "2", "--state-dir", str(tmp_path)])
    assert alone.exit_code == 2
    assert "--max-sandboxes is the quota of --api-key's key" in alone.output
    clash = ["admin", "serve", "--state-dir", str(tmp_path), "--build-context-root", str(tmp_path)]
    refused = CliRunner().invoke(app, clash)
    assert refused.exit_code == 2
    assert "overlaps the sandboxes' socket folders" in refused.output
