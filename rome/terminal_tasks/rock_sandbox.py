"""Terminal tasks on a ROCK fleet, through the ROCK SDK: their images (`rock.sdk.Images`) and sandboxes
(`rock.sdk.Sandbox`).

A task's image is made by the fleet: a worker builds the task's environment folder (which must lie under one
of the fleet's build roots: `rock admin serve --build-context-root`, or `PrivateFleet(build_roots=...)`)
through its alias table, and answers the tag, the image's working directory and how its base images differ
from what the Dockerfile names. The caller needs no Docker of its own."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from rock.sdk import CommandTimeout, ImageInfo, Images, RockError, Sandbox
from rock.sdk.errors import RemoteFileNotFound
from rome.terminal_tasks.grading_guard import Baseline, take_baseline
from rome.terminal_tasks.network import allowlist_cidrs, grant
from rome.terminal_tasks.sandbox import BACKSTOP_SEC, CommandResult, SandboxError, cap_output
from rome.terminal_tasks.task import Task, TaskImageError, image_build

BuildNetwork = Literal["none", "packages", "bridge"]

_locks: dict[tuple[str, str, str], threading.Lock] = {}
_locks_guard = threading.Lock()

# A trial's sandbox lives at most this long past its agent's and verifier's timeouts.
TTL_MARGIN_SEC = 900.0


# The ROCK sandbox network for each policy: `packages` has no network but the package cache's forwarder.
# `allowlist` is the bridge with egress firewalled to the allowed hosts' addresses.
SANDBOX_NETWORK = {"none": "none", "packages": "packages", "allowlist": "bridge", "full": "bridge"}


def ensure_image(task: Task, admin_url: str | None, network: BuildNetwork | None = None) -> ImageInfo:
    """The task's image on the fleet at `admin_url`: built from its environment folder (a build of content
    built before returns at once) or its `image` resolved. `network`: what the build's RUN steps reach; None
    is the fleet's package cache where it has one, else none. TaskImageError when it fails."""
    url = fleet_url(admin_url)
    network = network or default_build_network(url)
    key = (url, str(task.path), network)
    with _locks_guard:
        lock = _locks.setdefault(key, threading.Lock())
    images = Images(admin_url=url)
    with lock:  # the attempts of one task ask at once: one waits for the other's build, then finds it built
        try:
            if task.build_context is None or task.dockerfile is None:
                return images.ensure(image=task.image or "")
            return images.ensure(**image_build(task, network))
        except (RockError, ValueError) as exc:
            raise TaskImageError(f"{task.id}: the fleet did not make its image: {exc}") from exc


def fleet_url(admin_url: str | None) -> str:
    from rock.sdk.calls import admin_url as resolve

    return resolve(admin_url)


def fleet_health(admin_url: str | None) -> dict:
    """The admin's /health (its package cache, workers); {} when it does not answer."""
    import httpx

    from rock.sdk.calls import tls_context

    try:
        # Asked before every image a trial needs: the SDK's shared TLS settings spare ~20 ms of CPU each.
        reply = httpx.get(f"{fleet_url(admin_url)}/health", timeout=10, verify=tls_context()).json()
    except (httpx.HTTPError, ValueError):
        return {}
    return reply if isinstance(reply, dict) else {}


_networks: dict[str, BuildNetwork] = {}


def default_build_network(admin_url: str) -> BuildNetwork:
    """`packages` on a fleet with a package cache (a task's `pip install` builds offline), else `none`: the
    fleet's answer now, or when it does not answer, its last answer in this process (the build arguments of
    `packages` are part of the image's content, so a run keeps asking for the same while its admin is briefly
    unreachable; a new fleet on the same address is asked afresh)."""
    if health := fleet_health(admin_url):
        _networks[admin_url] = "packages" if health.get("package_cache") else "none"
    return _networks.get(admin_url, "none")


class RockSandbox:
    def __init__(
        self,
        image: ImageInfo,
        task: Task,
        admin_url: str | None,
        allow_internet: bool = False,
        package_cache: bool = False,
        open_sandbox: Callable[..., Sandbox] = Sandbox,
    ) -> None:
        """`image`: the fleet's answer for the task's image (`ensure_image`); commands run in its
        working directory, as they would in `docker run` (ROCK starts them in $HOME). `open_sandbox`: makes
        the ROCK sandbox from `Sandbox`'s options (`GroupedOpens.open` to share one group create with the
        trials that start at the same time)."""
        self.workdir = image.workdir
        self.network_policy, note = grant(task.network.most, allow_internet, package_cache)
        self.notes = [note] if note else []
        egress: list[str] = []
        if self.network_policy == "allowlist":
            try:
                egress = allowlist_cidrs(task.network.allowed_hosts)
            except ValueError as exc:
                self.network_policy = "packages" if package_cache else "none"
                self.notes.append(f"{exc}; granted {self.network_policy} instead")
        # Made with the larger phase's wish; `set_network` narrows it for the phase that asks less.
        self._phase_policy = self.network_policy
        try:
            self._sandbox = open_sandbox(
                image=image.tag,
                cpus=task.cpus,
                memory=f"{task.memory_mb}m",
                network=SANDBOX_NETWORK[self.network_policy],  # type: ignore[arg-type]
                egress=egress,
                ttl=task.agent_timeout_sec + task.verifier_timeout_sec + TTL_MARGIN_SEC,
                idle_timeout=max(task.agent_timeout_sec, task.verifier_timeout_sec) + BACKSTOP_SEC,
                queue_timeout=600.0,
                # Terminal tasks are written for a root shell (they edit /app, /etc, /root).
                user="root",
                admin_url=admin_url,
            )
        except RockError as exc:
            raise SandboxError(f"ROCK could not create a sandbox from {image.tag}: {exc}") from exc
        try:
            # Before any command of the agent's: what grading later compares the toolchain with.
            self.grading_baseline: Baseline | None = take_baseline(self)
        except SandboxError:
            self.close()
            raise

    def set_network(self, policy: str) -> str:
        """The next phase's network, switched in place: `none` when `policy` is none, else the sandbox's own
        (ROCK can take a network away and give it back, not swap it for a smaller one). Returns what the
        phase has, with a note when that is more than it asked for."""
        wanted = "none" if policy == "none" else self.network_policy
        if wanted != policy:
            note = f"a phase asked for {policy} but has the sandbox's {wanted} (ROCK cannot narrow to it)"
            if note not in self.notes:
                self.notes.append(note)
        if wanted != self._phase_policy:
            try:
                self._sandbox.set_network(SANDBOX_NETWORK[wanted])  # type: ignore[arg-type]
            except RockError as exc:
                raise SandboxError(f"sandbox {self._sandbox.id}: switching network failed: {exc}") from exc
            self._phase_policy = wanted
        return wanted

    @property
    def rock(self) -> Sandbox:
        """The ROCK SDK sandbox itself, for agents that drive it directly (iflow's ROCK executor)."""
        return self._sandbox

    def run(self, command: str, timeout: float, env: dict[str, str] | None = None) -> CommandResult:
        return self._exec(["bash", "-c", command], timeout, self.workdir, env)

    def run_argv(self, argv: list[str], timeout: float) -> CommandResult:
        """Run `argv` as a fresh process without a shell, from / (for programs that must not depend on the
        image's shell)."""
        return self._exec(argv, timeout, "/", None)

    def _exec(self, argv: list[str], timeout: float, cwd: str, env: dict[str, str] | None) -> CommandResult:
        try:
            obs = self._sandbox.exec(argv, timeout=timeout, cwd=cwd, env=env)
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
    """Sandboxes (and the tasks' images) on the fleet at `admin_url`; `allow_internet` is the operator's
    consent to `full`."""

    name = "rock"

    def __init__(self, admin_url: str | None = None, allow_internet: bool = False) -> None:
        self.admin_url = admin_url
        self.allow_internet = allow_internet
        self.package_cache = bool(fleet_health(admin_url).get("package_cache"))

    def image(self, task: Task) -> ImageInfo:
        """The task's image, built by the fleet: with the full network when the operator consented to it and
        the task asks for it, else with the fleet's package cache where it has one."""
        return ensure_image(task, self.admin_url, self.build_network(task))

    def build_network(self, task: Task) -> BuildNetwork:
        if self.allow_internet and task.network.most == "full":
            return "bridge"
        return default_build_network(fleet_url(self.admin_url))

    def open(self, image: ImageInfo, task: Task) -> RockSandbox:
        return RockSandbox(image, task, self.admin_url, self.allow_internet, self.package_cache)
