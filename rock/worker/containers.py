"""Docker calls of a worker (blocking: the worker runs them in its thread pool).

Every container carries labels `rock.worker` and `rock.sandbox`, so a restarted worker finds its own.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker
import docker.errors

from rock.rocklet.errors import RockletUnavailable
from rock.sdk.types import SandboxSpec
from rock.worker.contract import WorkerSandbox
from rock.worker.name_files import sandbox_hostname, write_name_files
from rock.worker.socket_dir import SOCKET_MOUNT, release_host_dir

LABEL_WORKER = "rock.worker"
LABEL_SANDBOX = "rock.sandbox"
LABEL_OWNER = "rock.owner"
LABEL_DISK = "rock.disk"
"""The sandbox's disk limit in bytes, for a restarted worker's disk watch."""
LABEL_FLEET = "rock.fleet"
"""A fingerprint of the fleet's worker credential: workers of one fleet reap each other's leftovers, never
another fleet's."""
LOG_LIMITS = {"max-size": "10m", "max-file": "2"}
"""The container log's cap (json-file): at most 20 MiB however much the sandbox prints."""
HOME = "/home/rock"
ROOT_HOME = "/root"
ROOT_CAPABILITIES = [
    "CHOWN",  # chown files (dpkg, tar -p, `chown app:app /srv/data`)
    "DAC_OVERRIDE",  # read and write files whatever their mode, as root expects
    "FOWNER",  # chmod / utime / set ACLs on files root does not own
    "FSETID",  # keep setuid/setgid bits when root edits such files
    "SETUID",  # drop to another user: apt's _apt sandbox, su, runuser, services
    "SETGID",
    "KILL",  # signal processes of the other users it started
    "NET_BIND_SERVICE",  # serve on ports below 1024 (inside the sandbox: its own loopback)
]
"""What a root shell in a terminal task needs, and no more. Left out of Docker's defaults: MKNOD (device
nodes), NET_RAW (raw sockets: spoofing on a bridge network), SETPCAP and SETFCAP (granting capabilities),
SYS_CHROOT and AUDIT_WRITE. no-new-privileges still stops any setuid binary from gaining more."""


def connect(pool_size: int) -> docker.DockerClient:
    try:
        client = docker.from_env(max_pool_size=pool_size, timeout=120)
        client.ping()
    except docker.errors.DockerException as exc:
        raise RuntimeError(
            f"the worker cannot reach Docker ({exc}); start dockerd (./scripts/setup.sh does) and retry"
        ) from exc
    return client


def container_name(sandbox_id: str) -> str:
    return f"rock-{sandbox_id}"


def start_container(
    client: docker.DockerClient,
    *,
    sandbox_id: str,
    worker_id: str,
    fleet: str,
    owner: str,
    image: str,
    spec: SandboxSpec,
    runtime_dir: Path,
    host_dir: Path,
    command: list[str],
    env: dict[str, str],
    disk_quota: bool,
    labels: dict[str, str] | None = None,
    prepare: Callable[[docker.DockerClient, str], None] | None = None,
) -> str:
    """Create and start the sandbox's container; returns its id. Never pulls: images are local.

    A limit of less than one CPU is set by `limit_cpus` once the rocklet answers: the interpreter's start
    then runs at full speed (under a 0.25-CPU quota it would take four times as long), and no user command
    runs before it. A limit of one CPU or more cannot slow that single-threaded start, so it is set here and
    the worker saves the update (`limit_at_create`).
    `disk_quota`: Docker enforces `spec.disk` on the writable layer (overlay2 on xfs with pquota only);
    elsewhere the worker's disk watch does. `labels`: more labels (rock.worker.lifetime's).
    A sandbox without a network is made with Docker's networking disabled (rock.worker.name_files says why
    and what stands in for it).
    """
    uid, _, gid = spec.user.partition(":")
    # Root gets its own home from the image, as in `docker run`; any other user a fresh one on a tmpfs.
    home = ROOT_HOME if spec.is_root else HOME
    tmpfs = {"/tmp": "mode=1777"} | ({} if spec.is_root else {HOME: f"uid={uid},gid={gid},mode=0755"})
    offline = spec.network in ("none", "packages")
    hostname = sandbox_hostname(sandbox_id) if offline else None
    name_binds = write_name_files(host_dir, hostname) if hostname else {}
    # The low-level API: the high-level `containers.create` inspects the new container once more.
    api = client.api
    host_config = api.create_host_config(
        # An unprivileged user's shell needs no capability, so none is kept; root gets a short list back.
        cap_drop=["ALL"],
        cap_add=ROOT_CAPABILITIES if spec.is_root else None,
        security_opt=["no-new-privileges"],
        # `packages` is no network at all: the package cache comes in through the rocklet's forwarder.
        network_mode="none" if spec.network == "packages" else spec.network,
        mem_limit=spec.memory_bytes,
        **(_cpu_limit(spec.cpus) if limit_at_create(spec.cpus) else {}),
        memswap_limit=spec.memory_bytes,
        pids_limit=spec.pids,
        binds={
            str(runtime_dir): {"bind": "/opt/rock", "mode": "ro"},
            str(host_dir): {"bind": SOCKET_MOUNT, "mode": "rw"},
            **name_binds,
        },
        tmpfs=tmpfs,
        storage_opt={"size": str(spec.disk_bytes)} if disk_quota else None,
        # No one file larger than the disk limit (a single fallocate cannot fill the host between two disk
        # checks), and a capped log (what the sandbox prints to its stdout is disk too).
        ulimits=[docker.types.Ulimit(name="fsize", soft=spec.disk_bytes, hard=spec.disk_bytes)],
        log_config=docker.types.LogConfig(type="json-file", config=LOG_LIMITS),
    )
    container_id: str = api.create_container(
        image,
        command=command,
        name=container_name(sandbox_id),
        detach=True,
        user=spec.user,
        labels={
            LABEL_WORKER: worker_id,
            LABEL_SANDBOX: sandbox_id,
            LABEL_OWNER: owner,
            LABEL_FLEET: fleet,
            LABEL_DISK: str(spec.disk_bytes),
            **(labels or {}),
        },
        environment={"HOME": home, **env, **spec.env},
        volumes=["/opt/rock", SOCKET_MOUNT],
        working_dir=home,
        host_config=host_config,
        network_disabled=offline,
        hostname=hostname,
    )["Id"]
    if prepare is not None:  # between create and start (rock.worker.scratch: the layer's own filesystem)
        prepare(client, container_id)
    try:
        api.start(container_id)
    except docker.errors.APIError:
        api.remove_container(container_id, force=True)
        raise
    return container_id


def kill_container(client: docker.DockerClient, sandbox_id: str) -> None:
    try:
        client.api.kill(container_name(sandbox_id))
    except docker.errors.APIError as exc:
        if exc.status_code not in (404, 409):  # gone, or not running any more
            raise


def restrict_egress(client: docker.DockerClient, sandbox_id: str, allowed: list[str]) -> None:
    """Firewall the sandbox's own network namespace: outgoing IPv4 only to `allowed`, no IPv6 at all.

    The rules live in the container's namespace (entered with nsenter from the host), where the sandbox's
    unprivileged, capability-less processes cannot change them.
    """
    pid = client.api.inspect_container(container_name(sandbox_id))["State"]["Pid"]
    enter = ["nsenter", f"--net=/proc/{pid}/ns/net"]
    output = ["-w", "-A", "OUTPUT"]
    rules = [
        ["iptables", *output, "-o", "lo", "-j", "ACCEPT"],
        ["iptables", *output, "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT"],
        *(["iptables", *output, "-d", cidr, "-j", "ACCEPT"] for cidr in allowed),
        # REJECT rather than DROP: a refused connect fails at once (network unreachable), as with `none`.
        ["iptables", *output, "-j", "REJECT", "--reject-with", "icmp-net-unreachable"],
        ["ip6tables", *output, "-o", "lo", "-j", "ACCEPT"],
        ["ip6tables", *output, "-j", "REJECT", "--reject-with", "icmp6-no-route"],
    ]
    for rule in rules:
        try:
            subprocess.run([*enter, *rule], check=True, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError) as exc:
            stderr = getattr(exc, "stderr", "") or ""
            raise EgressError(
                f"could not set the egress allowlist ({' '.join(rule)}): {exc} {stderr.strip()}; the worker "
                "must run as root on a host with nsenter and iptables"
            ) from exc


class EgressError(RuntimeError):
    pass


CPU_PERIOD = 100_000
"""Microseconds of the CFS period the CPU quota is counted in (Docker's default)."""


def limit_at_create(cpus: float) -> bool:
    """Whether a sandbox's CPU limit goes into its create (one CPU or more) rather than an update once its
    rocklet answers (see `start_container`)."""
    return cpus >= 1


def _cpu_limit(cpus: float) -> dict[str, int]:
    return {"cpu_period": CPU_PERIOD, "cpu_quota": int(cpus * CPU_PERIOD)}


def limit_cpus(client: docker.DockerClient, sandbox_id: str, cpus: float) -> None:
    client.api.update_container(container_name(sandbox_id), **_cpu_limit(cpus))


def remove_container(client: docker.DockerClient, sandbox_id: str, host_dir: Path) -> bool:
    """Remove the container and its socket folder; False if there was no container."""
    try:
        client.api.remove_container(container_name(sandbox_id), force=True)
        found = True
    except docker.errors.NotFound:
        found = False
    except docker.errors.APIError as exc:
        if exc.status_code != 409:  # 409: a removal of this container is already under way
            raise
        found = True
    release_host_dir(host_dir)
    return found


def init_pid(client: docker.DockerClient, sandbox_id: str) -> int:
    """The host pid of the container's init process: its rocklet, the only process that may serve the
    rocklet's socket (the worker's rocklet client checks every connection's peer against it)."""
    pid = int(client.api.inspect_container(container_name(sandbox_id))["State"]["Pid"] or 0)
    if pid <= 0:
        raise RockletUnavailable(f"sandbox {sandbox_id}'s container is not running, so it has no rocklet")
    return pid


def inspect_state(client: docker.DockerClient, sandbox_id: str) -> dict[str, Any] | None:
    try:
        return client.api.inspect_container(container_name(sandbox_id))["State"]
    except docker.errors.NotFound:
        return None


def logs_tail(client: docker.DockerClient, sandbox_id: str, lines: int = 30) -> str:
    try:
        raw = client.api.logs(container_name(sandbox_id), tail=lines)
    except docker.errors.NotFound:
        return ""
    return raw.decode(errors="replace").strip()


def describe_stop(state: dict[str, Any], memory: str | None = None) -> tuple[str, str]:
    """(status, detail) of a container that is not plainly running: `oom_killed` or `exited`."""
    if state.get("OOMKilled"):
        limit = f" of {memory}" if memory else ""
        return (
            "oom_killed",
            f"the sandbox ran out of its memory{limit} and was OOM-killed; give it more memory",
        )
    return (
        "exited",
        f"the sandbox's container exited with code {state.get('ExitCode')}: {state.get('Error') or ''}",
    )


_OOM_COUNTERS = (
    ("/sys/fs/cgroup/memory/docker/{id}/memory.oom_control", "oom_kill"),  # v1, cgroupfs driver
    ("/sys/fs/cgroup/memory/system.slice/docker-{id}.scope/memory.oom_control", "oom_kill"),  # v1, systemd
    ("/sys/fs/cgroup/system.slice/docker-{id}.scope/memory.events", "oom_kill"),  # v2, systemd
    ("/sys/fs/cgroup/docker/{id}/memory.events", "oom_kill"),  # v2, cgroupfs
)


def oom_counter(container_id: str) -> tuple[Path, str] | None:
    """The cgroup file that counts the container's OOM kills, where this host exposes one.

    Reading it after each command costs microseconds, so the command that hit the memory limit can report
    it itself, before Docker's `oom` event (which the worker also watches) arrives.
    """
    for template, key in _OOM_COUNTERS:
        path = Path(template.format(id=container_id))
        if path.exists():
            return path, key
    return None


def oom_kills(counter: tuple[Path, str]) -> int:
    path, key = counter
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def list_sandboxes(client: docker.DockerClient, worker_id: str, oom: set[str]) -> list[WorkerSandbox]:
    """This worker's containers as (id, status); one list call, plus an inspect only for stopped ones."""
    out = []
    for c in client.api.containers(all=True, filters={"label": f"{LABEL_WORKER}={worker_id}"}):
        sandbox_id = c["Labels"][LABEL_SANDBOX]
        if c["State"] == "running" and sandbox_id not in oom:
            out.append(WorkerSandbox(id=sandbox_id, status="running"))
            continue
        state = inspect_state(client, sandbox_id)
        if state is None or state.get("Status") in ("created", "removing"):
            continue  # still starting (its create call reports on it), or going away
        if sandbox_id in oom:
            state["OOMKilled"] = True
        elif state.get("Running"):  # it started between the list and the inspect
            out.append(WorkerSandbox(id=sandbox_id, status="running"))
            continue
        status, detail = describe_stop(state)
        out.append(WorkerSandbox(id=sandbox_id, status=status, detail=detail))  # type: ignore[arg-type]
    return out


def strays(client: docker.DockerClient, fleet: str, worker_id: str) -> dict[str, Path]:
    """{sandbox id: socket folder} of this fleet's containers on this Docker host that other workers labelled
    (a worker lost for good leaves them; the admin says which to remove)."""
    found = {}
    for c in client.api.containers(all=True, filters={"label": f"{LABEL_FLEET}={fleet}"}):
        if c["Labels"].get(LABEL_WORKER) != worker_id:
            mounts = [m["Source"] for m in c.get("Mounts", []) if m.get("Destination") == SOCKET_MOUNT]
            found[c["Labels"][LABEL_SANDBOX]] = Path(mounts[0]) if mounts else Path("/nonexistent")
    return found


def labelled(client: docker.DockerClient, worker_id: str) -> list[tuple[str, str, str, int | None]]:
    """(sandbox id, container id, docker state, disk limit) of every container this worker labelled."""
    return [
        (c["Labels"][LABEL_SANDBOX], c["Id"], c["State"], _int_or_none(c["Labels"].get(LABEL_DISK)))
        for c in client.api.containers(all=True, filters={"label": f"{LABEL_WORKER}={worker_id}"})
    ]


def _int_or_none(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() else None
