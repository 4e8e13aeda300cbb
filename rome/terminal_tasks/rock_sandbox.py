"""Terminal tasks' sandboxes on a ROCK fleet, through the ROCK SDK (`rock.sdk.Sandbox`)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from rock.sdk import CommandTimeout, RockError, Sandbox
from rock.sdk.errors import RemoteFileNotFound
from rome.terminal_tasks.sandbox import BACKSTOP_SEC, CommandResult, SandboxError, cap_output
from rome.terminal_tasks.task import Task

# A trial's sandbox lives at most this long past its agent's and verifier's timeouts.
TTL_MARGIN_SEC = 900.0


def image_workdir(image: str) -> str:
    """The image's WORKDIR: commands run there, as they would in `docker run` (ROCK starts in $HOME)."""
    import docker

    client = docker.from_env()
    try:
        return client.images.get(image).attrs["Config"].get("WorkingDir") or "/"
    finally:
        client.close()


class RockSandbox:
    def __init__(self, image: str, task: Task, admin_url: str | None) -> None:
        self.workdir = image_workdir(image)
        try:
            self._sandbox = Sandbox(
                image=image,
                cpus=task.cpus,
                memory=f"{task.memory_mb}m",
                network="bridge" if task.allow_internet else "none",
                ttl=task.agent_timeout_sec + task.verifier_timeout_sec + TTL_MARGIN_SEC,
                idle_timeout=max(task.agent_timeout_sec, task.verifier_timeout_sec) + BACKSTOP_SEC,
                queue_timeout=600.0,
                # Terminal tasks are written for a root shell (they edit /app, /etc, /root).
                user="root",
                admin_url=admin_url,
            )
        except RockError as exc:
            raise SandboxError(f"ROCK could not create a sandbox from {image}: {exc}") from exc

    @property
    def rock(self) -> Sandbox:
        """The ROCK SDK sandbox itself, for agents that drive it directly (iflow's ROCK executor)."""
        return self._sandbox

    def run(self, command: str, timeout: float, env: dict[str, str] | None = None) -> CommandResult:
        try:
            obs = self._sandbox.exec(["bash", "-c", command], timeout=timeout, cwd=self.workdir, env=env)
        except CommandTimeout as exc:
            output = exc.observation.output if exc.observation is not None else ""
            return CommandResult(
                output=cap_output(output), exit_code=None, duration_sec=timeout, timed_out=True
            )
        except RockError as exc:
            raise SandboxError(f"sandbox {self._sandbox.id}: {exc}") from exc
        return CommandResult(
            output=cap_output(obs.output), exit_code=obs.exit_code, duration_sec=obs.duration, timed_out=False
        )

    def upload(self, paths: list[Path], remote_dir: str) -> None:
        self.run(f"mkdir -p {remote_dir}", timeout=30)
        try:
            for path in paths:
                self._sandbox.upload(path, remote_dir)
        except RockError as exc:
            raise SandboxError(
                f"uploading to {remote_dir} in sandbox {self._sandbox.id} failed: {exc}"
            ) from exc

    def read_text(self, path: str) -> str | None:
        try:
            return self._sandbox.read_file(path).decode("utf-8", "replace")
        except RemoteFileNotFound:
            return None
        except RockError as exc:
            raise SandboxError(f"reading {path} in sandbox {self._sandbox.id} failed: {exc}") from exc

    def close(self) -> None:
        with contextlib.suppress(RockError):
            self._sandbox.close()


class RockProvider:
    name = "rock"

    def __init__(self, admin_url: str | None = None) -> None:
        self.admin_url = admin_url

    def open(self, image: str, task: Task) -> RockSandbox:
        return RockSandbox(image, task, self.admin_url)
