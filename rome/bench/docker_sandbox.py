"""Trial sandboxes made straight with the docker SDK (`rome-bench --sandbox docker`), without ROCK."""

from __future__ import annotations

import contextlib
import io
import math
import tarfile
import threading
import time
from pathlib import Path

from rock.sdk import ImageInfo, ImageRequest
from rome.terminal_tasks.network import grant
from rome.terminal_tasks.sandbox import (
    BACKSTOP_SEC,
    OUTPUT_CAP,
    CommandResult,
    SandboxError,
    TrialSandbox,
    cap_output,
)
from rome.terminal_tasks.task import Task


def tar_of(paths: list[Path]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path in paths:
            tar.add(str(path), arcname=path.name)
    return buf.getvalue()


def timed_command(command: str, timeout: float) -> list[str]:
    """`timeout` inside the sandbox kills the command (and, with -k, whatever ignores SIGTERM)."""
    return ["timeout", "-k", "5", str(max(1, math.ceil(timeout))), "bash", "-c", command]


class DockerSandbox:
    """A container made straight with the docker SDK; used when ROCK's SDK is not available."""

    def __init__(self, client, image: str, task: Task, allow_internet: bool = False) -> None:  # type: ignore[no-untyped-def]
        import docker.errors

        self._client = client
        # Plain Docker has no package cache: `packages` is `none` here; `full` needs the operator's consent.
        self.network_policy, note = grant(task.network.most, allow_internet, package_cache=False)
        self.notes = [note] if note else []
        if self.network_policy == "allowlist":
            # Plain Docker cannot firewall a container's egress: no network rather than all of it.
            self.network_policy = "none"
            self.notes.append("an allowlist needs ROCK's egress firewall (--sandbox rock); granted none")
        try:
            self._container = client.containers.run(
                image,
                entrypoint=["sleep"],
                command=["infinity"],
                detach=True,
                network_mode="bridge" if self.network_policy == "full" else "none",
                mem_limit=f"{task.memory_mb}m",
                nano_cpus=int(task.cpus * 1e9),
                pids_limit=4096,
                labels={"ale.component": "rome-bench", "ale.task": task.id},
            )
        except docker.errors.DockerException as exc:
            raise SandboxError(f"could not start a container from {image}: {exc}") from exc

    def run(self, command: str, timeout: float, env: dict[str, str] | None = None) -> CommandResult:
        api = self._client.api
        started = time.monotonic()
        exec_id = api.exec_create(self._container.id, timed_command(command, timeout), environment=env or {})
        chunks: list[bytes] = []

        def pump() -> None:
            for chunk in api.exec_start(exec_id, stream=True, demux=False):
                if sum(len(c) for c in chunks) < 2 * OUTPUT_CAP:
                    chunks.append(chunk)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        reader.join(timeout + BACKSTOP_SEC)
        duration = time.monotonic() - started
        output = cap_output(b"".join(chunks).decode("utf-8", "replace"))
        if reader.is_alive():
            return CommandResult(output=output, exit_code=None, duration_sec=duration, timed_out=True)
        exit_code = api.exec_inspect(exec_id)["ExitCode"]
        timed_out = exit_code in (124, 137) and duration >= timeout
        return CommandResult(output=output, exit_code=exit_code, duration_sec=duration, timed_out=timed_out)

    def upload(self, paths: list[Path], remote_dir: str) -> None:
        self.run(f"mkdir -p {remote_dir}", timeout=30)
        if not self._container.put_archive(remote_dir, tar_of(paths)):
            raise SandboxError(f"uploading {[p.name for p in paths]} to {remote_dir} failed")

    def read_text(self, path: str) -> str | None:
        import docker.errors

        try:
            stream, _ = self._container.get_archive(path)
        except docker.errors.NotFound:
            return None
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            member = tar.next()
            extracted = tar.extractfile(member) if member is not None else None
            return extracted.read().decode("utf-8", "replace") if extracted is not None else None

    def close(self) -> None:
        import docker.errors

        with contextlib.suppress(docker.errors.NotFound):
            self._container.remove(force=True)


class DockerProvider:
    name = "docker"

    def __init__(self, allow_internet: bool = False) -> None:
        import docker

        self._client = docker.from_env()
        self.allow_internet = allow_internet

    def image(self, task: Task) -> ImageInfo:
        """The task's image built on this host's Docker (no fleet here), under a sandbox's build limits: no
        network unless the operator consented to the full one and the task asks for it."""
        from rock.images.ensure import ensure_local
        from rock.images.errors import ImageError
        from rome.terminal_tasks.task import TaskImageError, image_build

        network = "bridge" if self.allow_internet and task.network.most == "full" else "none"
        try:
            if task.build_context is None or task.dockerfile is None:
                request = ImageRequest(image=task.image or "")
            else:
                request = ImageRequest(**image_build(task, network))
            return ensure_local(request, self._client)
        except (ImageError, ValueError) as exc:
            raise TaskImageError(f"{task.id}: image build failed: {exc}") from exc

    def open(self, image: ImageInfo, task: Task) -> TrialSandbox:
        return DockerSandbox(self._client, image.tag, task, self.allow_internet)
